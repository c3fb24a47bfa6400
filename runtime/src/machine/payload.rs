//! [`Payload`]: the value carried by machine inputs, messages, yields and results.

use core::any::{Any, TypeId};
use core::fmt;
use core::mem::{MaybeUninit, align_of, size_of};

/// A value of any `Send` type, moved (never copied or serialised) between a machine, the host
/// and handlers: a machine's input and result, a message's body, a command's argument and its
/// answer.
///
/// Why `Box<dyn Any + Send>` and not bytes: machines, senders and handlers live in one
/// address space, so a typed value moves with one pointer and the receiver gets it back with
/// [`Payload::downcast`]: no encoding, no copying, no schema. A value of at most two words
/// (an integer, an id, a small enum, `()`) is kept inside the payload and does not allocate;
/// a larger one is boxed. The payload also remembers its type's name, so a receiver that
/// expected another type can say what it got.
///
/// ```
/// use purloin::machine::Payload;
///
/// let p = Payload::new(42u64);
/// assert!(p.is::<u64>());
/// assert_eq!(p.downcast_ref::<u64>(), Some(&42));
/// let wrong = p.downcast::<String>().unwrap_err();
/// assert_eq!(wrong.type_name(), "u64");
/// assert_eq!(wrong.downcast::<u64>().unwrap(), 42);
/// ```
pub struct Payload {
    repr: Repr,
}

/// A small value lives in the payload itself (no allocation: a message of a token ring costs
/// no `malloc`/`free`); a larger one in a box.
enum Repr {
    Inline(Inline),
    Boxed { value: Box<dyn Any + Send>, type_name: &'static str },
}

/// Room for a value of at most two words, word-aligned.
type Slot = MaybeUninit<[usize; 2]>;

/// The type of an inline value, erased.
struct InlineType {
    type_id: fn() -> TypeId,
    type_name: fn() -> &'static str,
    /// Drops the value in place.
    drop: unsafe fn(*mut Slot),
}

/// An inline value: `slot` holds a live value of `ty`'s type (until it is moved out, after
/// which the `Inline` is forgotten, never dropped).
struct Inline {
    slot: Slot,
    ty: &'static InlineType,
}

impl Drop for Inline {
    fn drop(&mut self) {
        // SAFETY: `slot` holds a live value of `ty`'s type (the struct invariant); it is
        // dropped once, here.
        unsafe { (self.ty.drop)(&mut self.slot) }
    }
}

/// The `InlineType` of `T`.
struct TypeOf<T>(core::marker::PhantomData<T>);

impl<T: Any + Send> TypeOf<T> {
    /// Whether a `T` fits in a `Slot`.
    const FITS: bool = size_of::<T>() <= size_of::<Slot>() && align_of::<T>() <= align_of::<Slot>();

    const TYPE: &'static InlineType = &InlineType {
        type_id: TypeId::of::<T>,
        type_name: core::any::type_name::<T>,
        drop: Self::drop_in_slot,
    };

    /// # Safety
    /// `slot` holds a live `T`, which is not used again.
    unsafe fn drop_in_slot(slot: *mut Slot) {
        // SAFETY: caller contract; the slot is word-aligned and `T` fits (`FITS`).
        unsafe { core::ptr::drop_in_place(slot.cast::<T>()) }
    }
}

impl Payload {
    /// Wraps `value` (a value of at most two words is kept inline, without allocating).
    pub fn new<T: Any + Send>(value: T) -> Payload {
        if TypeOf::<T>::FITS {
            let mut slot = Slot::uninit();
            // SAFETY: `T` fits in the word-aligned slot (`FITS`); the value is moved in and
            // the `Inline` owns it from now on.
            unsafe { slot.as_mut_ptr().cast::<T>().write(value) };
            Payload { repr: Repr::Inline(Inline { slot, ty: TypeOf::<T>::TYPE }) }
        } else {
            Payload {
                repr: Repr::Boxed {
                    value: Box::new(value),
                    type_name: core::any::type_name::<T>(),
                },
            }
        }
    }

    /// The empty payload: `()` (does not allocate).
    pub fn empty() -> Payload {
        Payload::new(())
    }

    /// Whether this is the empty payload `()`.
    pub fn is_empty(&self) -> bool {
        self.is::<()>()
    }

    /// Whether the value is a `T`.
    #[inline]
    pub fn is<T: Any>(&self) -> bool {
        match &self.repr {
            Repr::Inline(i) => (i.ty.type_id)() == TypeId::of::<T>(),
            Repr::Boxed { value, .. } => value.is::<T>(),
        }
    }

    /// The name of the value's type (as [`core::any::type_name`] spelled it when the payload
    /// was made): for error messages.
    pub fn type_name(&self) -> &'static str {
        match &self.repr {
            Repr::Inline(i) => (i.ty.type_name)(),
            Repr::Boxed { type_name, .. } => type_name,
        }
    }

    /// A reference to the value if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        match &self.repr {
            // SAFETY: the slot holds a live value of the type `is` just checked.
            Repr::Inline(i) if self.is::<T>() => Some(unsafe { &*i.slot.as_ptr().cast::<T>() }),
            Repr::Inline(_) => None,
            Repr::Boxed { value, .. } => value.downcast_ref(),
        }
    }

    /// A mutable reference to the value if it is a `T`.
    pub fn downcast_mut<T: Any>(&mut self) -> Option<&mut T> {
        if !self.is::<T>() {
            return None;
        }
        match &mut self.repr {
            // SAFETY: the slot holds a live value of the type `is` just checked.
            Repr::Inline(i) => Some(unsafe { &mut *i.slot.as_mut_ptr().cast::<T>() }),
            Repr::Boxed { value, .. } => value.downcast_mut(),
        }
    }

    /// The value if it is a `T`; otherwise the payload back, unchanged.
    ///
    /// # Errors
    /// The value is not a `T` (the payload is returned so nothing is lost; its
    /// [`type_name`](Payload::type_name) says what it is).
    #[inline]
    pub fn downcast<T: Any>(self) -> Result<T, Payload> {
        if !self.is::<T>() {
            return Err(self);
        }
        match self.repr {
            Repr::Inline(i) => {
                let i = core::mem::ManuallyDrop::new(i);
                // SAFETY: the slot holds a live `T` (checked above); it is moved out once and
                // the `Inline` is forgotten, so it is not dropped again.
                Ok(unsafe { i.slot.as_ptr().cast::<T>().read() })
            }
            Repr::Boxed { value, type_name } => match value.downcast::<T>() {
                Ok(v) => Ok(*v),
                Err(value) => Err(Payload { repr: Repr::Boxed { value, type_name } }),
            },
        }
    }

    /// The value if it is a `T`, or an [`Error`](super::Error) naming the expected and the
    /// actual type (convenient with `?` inside [`Machine::step`](super::Machine::step)).
    ///
    /// # Errors
    /// The value is not a `T`.
    ///
    /// ```
    /// use purloin::machine::Payload;
    ///
    /// let err = Payload::new("text").take::<u64>().unwrap_err();
    /// assert!(err.to_string().contains("expected a payload of type u64"));
    /// ```
    #[inline]
    pub fn take<T: Any>(self) -> Result<T, super::Error> {
        self.downcast::<T>().map_err(|p| wrong_type(core::any::type_name::<T>(), &p))
    }
}

/// The error of [`Payload::take`]: out of line, so the hot path of a step stays small.
#[cold]
#[inline(never)]
fn wrong_type(expected: &str, got: &Payload) -> super::Error {
    super::Error::new(format!(
        "expected a payload of type {expected}, got {}; send the type the receiver expects",
        got.type_name()
    ))
}

impl Default for Payload {
    fn default() -> Payload {
        Payload::empty()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload<{}>", self.type_name())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Payload;
    use std::sync::Arc;

    #[test]
    fn inline_and_boxed_values_round_trip_and_drop_once() {
        let counted = Arc::new(());
        // Inline: one word.
        let p = Payload::new(counted.clone());
        assert_eq!(Arc::strong_count(&counted), 2);
        assert!(p.is::<Arc<()>>() && !p.is::<u64>());
        let wrong = p.downcast::<u64>().unwrap_err();
        assert_eq!(Arc::strong_count(&counted), 2, "a failed downcast gives the value back");
        drop(wrong);
        assert_eq!(Arc::strong_count(&counted), 1, "dropped once");
        let back = Payload::new(counted.clone()).downcast::<Arc<()>>().unwrap();
        assert_eq!(Arc::strong_count(&counted), 2, "moved out, not dropped");
        drop(back);
        // Boxed: three words.
        let mut big = Payload::new((counted.clone(), 7u64, 9u64));
        assert_eq!(big.type_name(), core::any::type_name::<(Arc<()>, u64, u64)>());
        big.downcast_mut::<(Arc<()>, u64, u64)>().unwrap().1 = 8;
        assert_eq!(big.downcast_ref::<(Arc<()>, u64, u64)>().unwrap().1, 8);
        drop(big);
        assert_eq!(Arc::strong_count(&counted), 1);
        let mut small = Payload::new(5u32);
        *small.downcast_mut::<u32>().unwrap() += 1;
        assert_eq!(small.type_name(), "u32");
        assert_eq!(small.take::<u32>().unwrap(), 6);
        assert!(Payload::empty().is_empty());
    }
}
