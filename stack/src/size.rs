//! Stack size classes: brpc's small / normal / large plus custom sizes.

use std::fmt;
use std::io;

use crate::os;

/// How big a stack to lease: one of brpc's three classes, or a custom size in bytes.
///
/// The size is the *usable* stack: the guard page comes on top of it. Every distinct size is
/// its own class with its own arenas and pool, so prefer the three named classes (at most
/// [`StackSize::MAX_CLASSES`] distinct sizes can be in use in one process).
///
/// # Examples
///
/// ```
/// use purloin_stack::StackSize;
///
/// assert_eq!(StackSize::default(), StackSize::Bytes(StackSize::DEFAULT_BYTES));
/// assert_eq!(StackSize::Small.bytes(), 32 * 1024);
/// assert_eq!(StackSize::Large.bytes(), 8 * 1024 * 1024);
/// // A custom size must be a multiple of the page size; `at_least` rounds up.
/// let page = purloin_stack::page_size();
/// assert_eq!(StackSize::at_least(100_000).bytes() % page, 0);
/// assert!(StackSize::at_least(100_000).bytes() >= 100_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackSize {
    /// 32 KiB: for many small green threads (brpc's `STACK_TYPE_SMALL`, may's default).
    Small,
    /// 1 MiB (brpc's `STACK_TYPE_NORMAL`, and its default).
    Normal,
    /// 8 MiB, the size of a Linux main thread's stack (brpc's `STACK_TYPE_LARGE`).
    Large,
    /// A custom usable size in bytes: a positive multiple of [`page_size`](crate::page_size)
    /// and at most [`StackSize::MAX_BYTES`]. [`StackSize::at_least`] rounds up for you.
    Bytes(usize),
}

impl StackSize {
    /// The usable bytes of the default size ([`StackSize::default`]).
    pub const DEFAULT_BYTES: usize = 128 * 1024;
    /// The usable bytes of [`StackSize::Small`].
    pub const SMALL_BYTES: usize = 32 * 1024;
    /// The usable bytes of [`StackSize::Normal`].
    pub const NORMAL_BYTES: usize = 1024 * 1024;
    /// The usable bytes of [`StackSize::Large`].
    pub const LARGE_BYTES: usize = 8 * 1024 * 1024;
    /// The largest stack this crate hands out (1 GiB). A computation that needs more should
    /// run on an OS thread (`std::thread::Builder::stack_size`).
    pub const MAX_BYTES: usize = 1 << 30;
    /// How many distinct sizes (the three named classes included) one process may use.
    pub const MAX_CLASSES: usize = 64;

    /// The requested usable size in bytes (not yet rounded to the page size: on systems with
    /// pages larger than 32 KiB the named classes are rounded up when leased).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(purloin_stack::StackSize::Normal.bytes(), 1 << 20);
    /// ```
    pub const fn bytes(self) -> usize {
        match self {
            StackSize::Small => Self::SMALL_BYTES,
            StackSize::Normal => Self::NORMAL_BYTES,
            StackSize::Large => Self::LARGE_BYTES,
            StackSize::Bytes(n) => n,
        }
    }

    /// A custom size of at least `bytes`, rounded up to a multiple of the page size (and to
    /// at least one page). Sizes above [`StackSize::MAX_BYTES`] are kept as they are, so
    /// [`lease`](crate::lease) reports them as too large.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_stack::{page_size, StackSize};
    ///
    /// assert_eq!(StackSize::at_least(1), StackSize::Bytes(page_size()));
    /// assert_eq!(StackSize::at_least(0), StackSize::Bytes(page_size()));
    /// ```
    pub fn at_least(bytes: usize) -> StackSize {
        let page = os::page_size();
        if bytes > Self::MAX_BYTES {
            return StackSize::Bytes(bytes);
        }
        StackSize::Bytes(bytes.max(1).div_ceil(page) * page)
    }

    /// Checks that this size can be leased: `Ok` for the named classes and for custom sizes
    /// that are a positive multiple of the page size and at most [`StackSize::MAX_BYTES`]. A
    /// scheduler calls this when it is configured, so a bad default is refused up front rather
    /// than by every spawn.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`](io::ErrorKind::InvalidInput), with a message that says which rule the
    /// size breaks and how to fix it (the error [`lease`](crate::lease) would return).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_stack::StackSize;
    ///
    /// assert!(StackSize::Normal.validate().is_ok());
    /// assert!(StackSize::Bytes(0).validate().is_err());
    /// assert!(StackSize::Bytes(1).validate().is_err());
    /// assert!(StackSize::Bytes(1 << 40).validate().is_err());
    /// ```
    pub fn validate(self) -> io::Result<()> {
        self.usable_bytes().map(|_| ())
    }

    /// The usable size this request maps to, after validation: the named classes are rounded
    /// up to the page size; custom sizes must already be valid.
    pub(crate) fn usable_bytes(self) -> io::Result<usize> {
        let page = os::page_size();
        match self {
            StackSize::Small | StackSize::Normal | StackSize::Large => {
                Ok(self.bytes().div_ceil(page) * page)
            }
            StackSize::Bytes(0) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-stack: a stack size of 0 bytes is invalid; use StackSize::Small, \
                     Normal or Large, or a positive multiple of the page size ({page} bytes)"
                ),
            )),
            StackSize::Bytes(n) if n > Self::MAX_BYTES => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-stack: a stack size of {n} bytes exceeds the limit of {} per \
                     stack; run code that needs that much stack on an OS thread \
                     (std::thread::Builder::stack_size) instead",
                    DisplaySize(Self::MAX_BYTES)
                ),
            )),
            StackSize::Bytes(n) if n % page != 0 => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-stack: a stack size of {n} bytes is not a multiple of the page \
                     size ({page} bytes); use StackSize::at_least({n}) to round it up (to {} \
                     bytes)",
                    n.div_ceil(page) * page
                ),
            )),
            StackSize::Bytes(n) => Ok(n),
        }
    }

    /// The named class whose usable size is `usable`, else `Bytes(usable)`.
    pub(crate) fn from_usable(usable: usize) -> StackSize {
        let page = os::page_size();
        [StackSize::Small, StackSize::Normal, StackSize::Large]
            .into_iter()
            .find(|s| s.bytes().div_ceil(page) * page == usable)
            .unwrap_or(StackSize::Bytes(usable))
    }
}

/// 128 KiB ([`StackSize::DEFAULT_BYTES`]): what a green thread gets when nobody chose a size.
///
/// The size is a bet between two costs. A parked green thread keeps one touched page of its
/// stack resident whatever its size, but its slot's span of address space decides how many
/// threads share one page of page tables (a 4 KiB page maps 2 MiB on x86_64): at 1 MiB every
/// two threads cost a page-table page (2 KiB each, which `VmRSS` does not show), at 128 KiB
/// sixteen share one (256 bytes each), at 32 KiB about sixty. With a million parked threads
/// that is 2 GB against 256 MB of page tables, and the page tables' allocation made spawning
/// them several times slower. Smaller is cheaper still, but the stack is fixed (nothing
/// grows it, as Go's 2 KiB starting stacks are grown by copying), so it must hold what
/// ordinary code needs without thought: formatting, std's I/O, a resolver call, a few dozen
/// frames of a debug build. 128 KiB is four times may's default (32 KiB, also brpc's small
/// class) and an eighth of brpc's default (1 MiB). Code that recurses deeply asks for more
/// ([`StackSize::Normal`], [`StackSize::Large`]); an overflow is reported with the size to
/// ask for, never silent.
impl Default for StackSize {
    fn default() -> StackSize {
        StackSize::Bytes(Self::DEFAULT_BYTES)
    }
}

impl fmt::Display for StackSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DisplaySize(self.bytes()).fmt(f)
    }
}

/// Formats a byte count as "32 KiB", "1 MiB", "8 MiB", or "12345 bytes" when it is not a
/// whole number of KiB. The overflow handler uses the same rules without `fmt`
/// (`overflow::write_size`).
pub(crate) struct DisplaySize(pub(crate) usize);

impl fmt::Display for DisplaySize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
            write!(f, "{} GiB", n >> 30)
        } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
            write!(f, "{} MiB", n >> 20)
        } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
            write!(f, "{} KiB", n >> 10)
        } else {
            write!(f, "{n} bytes")
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn display_sizes() {
        assert_eq!(StackSize::Small.to_string(), "32 KiB");
        assert_eq!(StackSize::Normal.to_string(), "1 MiB");
        assert_eq!(StackSize::Large.to_string(), "8 MiB");
        assert_eq!(StackSize::Bytes(1 << 30).to_string(), "1 GiB");
        assert_eq!(StackSize::Bytes(12288).to_string(), "12 KiB");
        assert_eq!(StackSize::Bytes(1000).to_string(), "1000 bytes");
    }

    #[test]
    fn validation() {
        let page = os::page_size();
        assert_eq!(StackSize::Bytes(page).usable_bytes().unwrap(), page);
        for bad in [0, page + 1, StackSize::MAX_BYTES + page] {
            let err = StackSize::Bytes(bad).usable_bytes().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        let msg = StackSize::Bytes(page + 1).usable_bytes().unwrap_err().to_string();
        assert!(msg.contains("not a multiple of the page size"), "{msg}");
        assert!(msg.contains("at_least"), "{msg}");
        assert_eq!(StackSize::from_usable(32 * 1024), StackSize::Small);
        assert_eq!(StackSize::from_usable(3 * page), StackSize::Bytes(3 * page));
    }
}
