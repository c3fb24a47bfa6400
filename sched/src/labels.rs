//! Labels: key/value pairs on a green thread, inherited by the green threads it spawns, shown
//! in dumps and trace slices (pprof's profiler labels).
//!
//! A green thread's labels live in its record, as one shared pointer that only the green
//! thread itself changes ([`set_current_labels`]); a spawn from it copies the pointer to the
//! child (a reference count, and only when it has labels). Readers other than the green
//! thread look only while they own the record: a dump while it holds a parked green thread
//! for its stack walk, the trace when it switches the green thread in.
//!
//! A plain thread (`main`, a thread of a pool) has no record: its labels live in a
//! thread-local, set the same way, and the green threads it spawns inherit them too, so a
//! program that spawns from `main` labels its work as one that spawns from a green thread.

use core::fmt;
use std::sync::Arc;

/// Key/value labels of a green thread: sorted by key, each key once. Cloning shares them.
///
/// # Examples
///
/// ```
/// use purloin_sched::Labels;
///
/// let l = Labels::new([("route", "/login"), ("tenant", "7"), ("route", "/home")]);
/// assert_eq!(l.get("route"), Some("/home")); // a later pair wins
/// assert_eq!(l.to_string(), "route=/home, tenant=7");
/// let more = l.merged(&Labels::new([("tenant", "8"), ("stage", "auth")]));
/// assert_eq!(more.to_string(), "route=/home, stage=auth, tenant=8");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Labels(Arc<Pairs>);

/// The pairs of a [`Labels`], behind one thin pointer (a green thread's record keeps 8 bytes
/// for them).
type Pairs = Box<[(Box<str>, Box<str>)]>;

impl Labels {
    /// Labels from key/value pairs; when a key comes more than once, its last value stands.
    pub fn new<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Labels
    where
        K: Into<Box<str>>,
        V: Into<Box<str>>,
    {
        let mut v: Vec<(Box<str>, Box<str>)> =
            pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        // Stable: among equal keys the last pair ends up last, and is the one kept.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Box<str>, Box<str>)> = Vec::with_capacity(v.len());
        for pair in v {
            match out.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => out.push(pair),
            }
        }
        Labels(Arc::new(out.into_boxed_slice()))
    }

    /// These labels with `other`'s added (`other`'s value wins for a key both have).
    pub fn merged(&self, other: &Labels) -> Labels {
        Labels::new(self.iter().chain(other.iter()).map(|(k, v)| (Box::from(k), Box::from(v))))
    }

    /// The value of `key`, if set.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = purloin_sched::Labels::new([("k", "v")]);
    /// assert_eq!(l.get("k"), Some("v"));
    /// assert_eq!(l.get("x"), None);
    /// ```
    pub fn get(&self, key: &str) -> Option<&str> {
        let i = self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&self.0[i].1)
    }

    /// The pairs, by key.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = purloin_sched::Labels::new([("b", "2"), ("a", "1")]);
    /// assert_eq!(l.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// Number of pairs.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(purloin_sched::Labels::new([("k", "v")]).len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no pair.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(purloin_sched::Labels::new::<&str, &str>([]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Labels {
    /// `key=value, key=value`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The labels of the running green thread, or of the calling plain thread (see
/// [`set_current_labels`]); `None` when it has none.
///
/// # Examples
///
/// ```
/// use purloin_sched::Labels;
///
/// assert_eq!(purloin_sched::current_labels(), None);
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let got = sched
///     .spawn(|| {
///         purloin_sched::set_current_labels(Some(Labels::new([("job", "index")])));
///         // A green thread spawned now inherits them.
///         let child = purloin_sched::spawn(purloin_sched::current_labels).unwrap();
///         child.join().unwrap()
///     })
///     .join()
///     .unwrap();
/// assert_eq!(got.unwrap().get("job"), Some("index"));
/// ```
pub fn current_labels() -> Option<Labels> {
    match crate::thread::running_g() {
        Some(g) => g.own_labels(),
        None => plain_labels(),
    }
}

thread_local! {
    /// The labels of a plain thread (one that is not running a green thread).
    static PLAIN: core::cell::RefCell<Option<Labels>> = const { core::cell::RefCell::new(None) };
}

/// The calling plain thread's labels, which the green threads it spawns inherit.
pub(crate) fn plain_labels() -> Option<Labels> {
    PLAIN.try_with(|l| l.borrow().clone()).ok().flatten()
}

/// Replaces the running green thread's labels with `labels` and returns the ones it had
/// (pprof's `SetGoroutineLabels`; the facade's `labels::with` sets them for a region and puts
/// the old ones back). The green threads it spawns from now on inherit them; ones it spawned
/// before keep theirs. On a plain thread the labels are the thread's own (a thread-local),
/// and the green threads it spawns inherit them the same way.
///
/// # Examples
///
/// ```
/// use purloin_sched::Labels;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// sched
///     .spawn(|| {
///         let old = purloin_sched::set_current_labels(Some(Labels::new([("k", "v")])));
///         assert_eq!(old, None);
///         assert_eq!(purloin_sched::current_labels().unwrap().get("k"), Some("v"));
///         purloin_sched::set_current_labels(old);
///         assert_eq!(purloin_sched::current_labels(), None);
///     })
///     .join()
///     .unwrap();
/// ```
pub fn set_current_labels(labels: Option<Labels>) -> Option<Labels> {
    match crate::thread::running_g() {
        Some(g) => g.replace_own_labels(labels),
        None => PLAIN.try_with(|l| core::mem::replace(&mut *l.borrow_mut(), labels)).ok().flatten(),
    }
}
