//! [`Steal`]: the three-way outcome of every steal.

use core::fmt;
use core::iter::FromIterator;

/// The outcome of a steal from a [`Stealer`](crate::Stealer) or an
/// [`Injector`](crate::Injector).
///
/// * `Empty`: the queue was empty at some instant during the call.
/// * `Success(item)`: an item was taken (and, for batch steals, others were moved into the
///   destination worker).
/// * `Retry`: the queue may hold items but this call could not take one without waiting (another
///   thief is copying a batch out of the same queue, or a producer has reserved the next slot
///   but not yet written it). Nothing was taken; try another queue, or this one again later.
///
/// # Examples
///
/// ```
/// use purloin_deque::{Steal, Worker};
///
/// let w = Worker::bounded(4);
/// let s = w.stealer();
/// assert_eq!(s.steal(), Steal::Empty);
/// w.push(1).unwrap();
/// assert_eq!(s.steal(), Steal::Success(1));
/// ```
#[must_use = "a steal may have taken an item out of the queue; dropping it drops the item"]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Steal<T> {
    /// The queue was empty.
    Empty,
    /// An item was taken.
    Success(T),
    /// The steal lost a race; nothing was taken and the caller may try again.
    Retry,
}

impl<T> Steal<T> {
    /// Returns `true` if the queue was empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Steal;
    ///
    /// assert!(Steal::<i32>::Empty.is_empty());
    /// assert!(!Steal::Success(7).is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        matches!(self, Steal::Empty)
    }

    /// Returns `true` if an item was taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Steal;
    ///
    /// assert!(Steal::Success(7).is_success());
    /// assert!(!Steal::<i32>::Retry.is_success());
    /// ```
    #[inline]
    pub fn is_success(&self) -> bool {
        matches!(self, Steal::Success(_))
    }

    /// Returns `true` if the steal should be retried.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Steal;
    ///
    /// assert!(Steal::<i32>::Retry.is_retry());
    /// assert!(!Steal::<i32>::Empty.is_retry());
    /// ```
    #[inline]
    pub fn is_retry(&self) -> bool {
        matches!(self, Steal::Retry)
    }

    /// Returns the taken item, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Steal;
    ///
    /// assert_eq!(Steal::Success(7).success(), Some(7));
    /// assert_eq!(Steal::<i32>::Retry.success(), None);
    /// ```
    #[inline]
    pub fn success(self) -> Option<T> {
        match self {
            Steal::Success(item) => Some(item),
            _ => None,
        }
    }

    /// Keeps a `Success`; otherwise runs `f` (the next steal to try). If `self` was `Retry` and
    /// `f` returns `Empty`, the result is `Retry`: the first queue may still hold items.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Steal;
    ///
    /// assert_eq!(Steal::Success(1).or_else(|| Steal::Success(2)), Steal::Success(1));
    /// assert_eq!(Steal::Empty.or_else(|| Steal::Success(2)), Steal::Success(2));
    /// assert_eq!(Steal::<i32>::Retry.or_else(|| Steal::Empty), Steal::Retry);
    /// ```
    #[inline]
    pub fn or_else<F>(self, f: F) -> Steal<T>
    where
        F: FnOnce() -> Steal<T>,
    {
        match self {
            Steal::Empty => f(),
            Steal::Success(_) => self,
            Steal::Retry => match f() {
                Steal::Empty => Steal::Retry,
                other => other,
            },
        }
    }
}

impl<T> Steal<T> {
    /// Maps the item of a `Success`, keeping `Empty` and `Retry`.
    #[inline(always)]
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Steal<U> {
        match self {
            Steal::Empty => Steal::Empty,
            Steal::Success(item) => Steal::Success(f(item)),
            Steal::Retry => Steal::Retry,
        }
    }
}

impl<T> fmt::Debug for Steal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Steal::Empty => f.pad("Empty"),
            Steal::Success(_) => f.pad("Success(..)"),
            Steal::Retry => f.pad("Retry"),
        }
    }
}

/// Collects steals from several queues: the first `Success` wins; otherwise `Retry` if any
/// steal asked for a retry; otherwise `Empty`. Steals after the first success are not run (the
/// iterator is not consumed further).
///
/// # Examples
///
/// ```
/// use purloin_deque::{Steal, Worker};
///
/// let workers: Vec<Worker<u32>> = (0..3).map(|_| Worker::bounded(4)).collect();
/// workers[2].push(9).unwrap();
/// let stealers: Vec<_> = workers.iter().map(|w| w.stealer()).collect();
/// let found: Steal<u32> = stealers.iter().map(|s| s.steal()).collect();
/// assert_eq!(found, Steal::Success(9));
/// ```
impl<T> FromIterator<Steal<T>> for Steal<T> {
    fn from_iter<I>(iter: I) -> Steal<T>
    where
        I: IntoIterator<Item = Steal<T>>,
    {
        let mut retry = false;
        for steal in iter {
            match steal {
                Steal::Empty => {}
                Steal::Success(item) => return Steal::Success(item),
                Steal::Retry => retry = true,
            }
        }
        if retry { Steal::Retry } else { Steal::Empty }
    }
}
