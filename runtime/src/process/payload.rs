//! [`Payload`]: the value carried by process inputs, messages, yields and results.

use core::any::Any;
use core::fmt;

/// A value of any `Send` type, moved (never copied or serialised) between a process, the host
/// and handlers: a process's input and result, a message's body, a command's argument and its
/// answer.
///
/// Why `Box<dyn Any + Send>` and not bytes: processes, senders and handlers live in one
/// address space, so a typed value moves with one pointer and the receiver gets it back with
/// [`Payload::downcast`]: no encoding, no copying, no schema. A zero-sized value (`()`, a unit
/// struct) does not allocate. The payload also remembers its type's name, so a receiver that
/// expected another type can say what it got.
///
/// ```
/// use purloin::process::Payload;
///
/// let p = Payload::new(42u64);
/// assert!(p.is::<u64>());
/// assert_eq!(p.downcast_ref::<u64>(), Some(&42));
/// let wrong = p.downcast::<String>().unwrap_err();
/// assert_eq!(wrong.type_name(), "u64");
/// assert_eq!(wrong.downcast::<u64>().unwrap(), 42);
/// ```
pub struct Payload {
    value: Box<dyn Any + Send>,
    type_name: &'static str,
}

impl Payload {
    /// Wraps `value`.
    pub fn new<T: Any + Send>(value: T) -> Payload {
        Payload { value: Box::new(value), type_name: core::any::type_name::<T>() }
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
    pub fn is<T: Any>(&self) -> bool {
        self.value.is::<T>()
    }

    /// The name of the value's type (as [`core::any::type_name`] spelled it when the payload
    /// was made): for error messages.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// A reference to the value if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.value.downcast_ref()
    }

    /// A mutable reference to the value if it is a `T`.
    pub fn downcast_mut<T: Any>(&mut self) -> Option<&mut T> {
        self.value.downcast_mut()
    }

    /// The value if it is a `T`; otherwise the payload back, unchanged.
    ///
    /// # Errors
    /// The value is not a `T` (the payload is returned so nothing is lost; its
    /// [`type_name`](Payload::type_name) says what it is).
    pub fn downcast<T: Any>(self) -> Result<T, Payload> {
        let Payload { value, type_name } = self;
        match value.downcast::<T>() {
            Ok(v) => Ok(*v),
            Err(value) => Err(Payload { value, type_name }),
        }
    }

    /// The value if it is a `T`, or an [`Error`](super::Error) naming the expected and the
    /// actual type (convenient with `?` inside [`Process::step`](super::Process::step)).
    ///
    /// # Errors
    /// The value is not a `T`.
    ///
    /// ```
    /// use purloin::process::Payload;
    ///
    /// let err = Payload::new("text").take::<u64>().unwrap_err();
    /// assert!(err.to_string().contains("expected a payload of type u64"));
    /// ```
    pub fn take<T: Any>(self) -> Result<T, super::Error> {
        self.downcast::<T>().map_err(|p| {
            super::Error::new(format!(
                "expected a payload of type {}, got {}; send the type the receiver expects",
                core::any::type_name::<T>(),
                p.type_name
            ))
        })
    }
}

impl Default for Payload {
    fn default() -> Payload {
        Payload::empty()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload<{}>", self.type_name)
    }
}
