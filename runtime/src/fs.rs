//! Files for green threads: std's file operations run inside [`blocking`],
//! so a green thread waiting for the disk never stalls the other green threads of its worker.
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("purloin-fs-doc-{}", std::process::id()));
//! purloin::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("hello.txt");
//! purloin::fs::write(&path, "hello, disk").unwrap();
//! assert_eq!(purloin::fs::read_to_string(&path).unwrap(), "hello, disk");
//! purloin::fs::remove_dir_all(&dir).unwrap();
//! ```
//!
//! # Why a hand-off and not the netpoller
//!
//! Regular files are always "ready" to epoll (it refuses them), so there is nothing to wait
//! for: a read that misses the page cache simply blocks in the kernel. [`blocking`] marks
//! the worker as inside a system call; a call that returns quickly (a page-cache hit: most
//! small reads) costs two atomic operations, and one that takes longer than the scheduler's
//! blocking threshold has its processor handed to another OS thread, which runs the worker's
//! other green threads meanwhile (Go's `entersyscall`/`exitsyscall`). This is cheaper than
//! tokio's `spawn_blocking` round trip to a thread pool for every call, and it is what Go does
//! for files.
//!
//! On a plain OS thread every function is std's, unchanged.
//!
//! [`blocking`]: crate::blocking

use std::fmt;
use std::fs::{Metadata, OpenOptions};
use std::io::{self, IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;

use crate::blocking;

/// Reads a whole file ([`std::fs::read`] inside [`blocking`]).
///
/// # Errors
/// std's: `NotFound`, `PermissionDenied`, … with the OS error kept.
///
/// # Examples
///
/// ```
/// let err = purloin::fs::read("/no/such/file").unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// ```
pub fn read<P: AsRef<Path>>(path: P) -> io::Result<Vec<u8>> {
    let path = path.as_ref();
    blocking(|| std::fs::read(path))
}

/// Reads a whole file as UTF-8 ([`std::fs::read_to_string`] inside `blocking`).
///
/// # Errors
/// As [`read`], or `InvalidData` when the file is not UTF-8.
pub fn read_to_string<P: AsRef<Path>>(path: P) -> io::Result<String> {
    let path = path.as_ref();
    blocking(|| std::fs::read_to_string(path))
}

/// Writes a whole file, creating or truncating it ([`std::fs::write`] inside `blocking`).
///
/// # Errors
/// std's, with the OS error kept.
pub fn write<P: AsRef<Path>, C: AsRef<[u8]>>(path: P, contents: C) -> io::Result<()> {
    let (path, contents) = (path.as_ref(), contents.as_ref());
    blocking(|| std::fs::write(path, contents))
}

/// [`std::fs::metadata`] inside `blocking`.
///
/// # Errors
/// std's.
pub fn metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    let path = path.as_ref();
    blocking(|| std::fs::metadata(path))
}

/// [`std::fs::create_dir_all`] inside `blocking`.
///
/// # Errors
/// std's.
pub fn create_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::create_dir_all(path))
}

/// [`std::fs::remove_file`] inside `blocking`.
///
/// # Errors
/// std's.
pub fn remove_file<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::remove_file(path))
}

/// [`std::fs::remove_dir_all`] inside `blocking`.
///
/// # Errors
/// std's.
pub fn remove_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::remove_dir_all(path))
}

/// [`std::fs::rename`] inside `blocking`.
///
/// # Errors
/// std's.
pub fn rename<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<()> {
    let (from, to) = (from.as_ref(), to.as_ref());
    blocking(|| std::fs::rename(from, to))
}

/// An open file whose every operation runs inside [`blocking`]: [`Read`],
/// [`Write`] and [`Seek`] for `File` and `&File`, like [`std::fs::File`].
///
/// # Examples
///
/// ```
/// use std::io::{Read, Seek, SeekFrom, Write};
/// use purloin::fs::File;
///
/// let path = std::env::temp_dir().join(format!("purloin-file-doc-{}", std::process::id()));
/// let mut f = File::create(&path).unwrap();
/// f.write_all(b"0123456789").unwrap();
/// f.seek(SeekFrom::Start(4)).unwrap();
/// let mut f = File::open(&path).unwrap();
/// f.seek(SeekFrom::Start(4)).unwrap();
/// let mut rest = String::new();
/// f.read_to_string(&mut rest).unwrap();
/// assert_eq!(rest, "456789");
/// purloin::fs::remove_file(&path).unwrap();
/// ```
pub struct File {
    inner: std::fs::File,
}

impl File {
    /// Opens a file for reading.
    ///
    /// # Errors
    /// std's (`NotFound`, `PermissionDenied`, …, the OS error kept).
    pub fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        let path = path.as_ref();
        blocking(|| std::fs::File::open(path)).map(File::from_std)
    }

    /// Creates (or truncates) a file for writing.
    ///
    /// # Errors
    /// std's.
    pub fn create<P: AsRef<Path>>(path: P) -> io::Result<File> {
        let path = path.as_ref();
        blocking(|| std::fs::File::create(path)).map(File::from_std)
    }

    /// Opens `path` with `options` (append, create_new, read + write, …).
    ///
    /// # Errors
    /// std's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::fs::OpenOptions;
    /// let path = std::env::temp_dir().join(format!("purloin-open-doc-{}", std::process::id()));
    /// let f = purloin::fs::File::open_with(OpenOptions::new().create(true).append(true), &path);
    /// assert!(f.is_ok());
    /// purloin::fs::remove_file(&path).unwrap();
    /// ```
    pub fn open_with<P: AsRef<Path>>(options: &OpenOptions, path: P) -> io::Result<File> {
        let path = path.as_ref();
        blocking(|| options.open(path)).map(File::from_std)
    }

    /// Wraps a std file.
    pub fn from_std(file: std::fs::File) -> File {
        File { inner: file }
    }

    /// The std file.
    pub fn into_std(self) -> std::fs::File {
        self.inner
    }

    /// [`std::fs::File::metadata`] inside `blocking`.
    ///
    /// # Errors
    /// std's.
    pub fn metadata(&self) -> io::Result<Metadata> {
        blocking(|| self.inner.metadata())
    }

    /// Flushes data and metadata to the disk ([`std::fs::File::sync_all`] inside `blocking`).
    ///
    /// # Errors
    /// std's.
    pub fn sync_all(&self) -> io::Result<()> {
        blocking(|| self.inner.sync_all())
    }

    /// Flushes data to the disk ([`std::fs::File::sync_data`] inside `blocking`).
    ///
    /// # Errors
    /// std's.
    pub fn sync_data(&self) -> io::Result<()> {
        blocking(|| self.inner.sync_data())
    }

    /// Truncates or extends the file ([`std::fs::File::set_len`] inside `blocking`).
    ///
    /// # Errors
    /// std's.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        blocking(|| self.inner.set_len(size))
    }

    /// A new handle to the same open file (a duplicated descriptor; they share the position).
    ///
    /// # Errors
    /// std's.
    pub fn try_clone(&self) -> io::Result<File> {
        self.inner.try_clone().map(File::from_std)
    }
}

impl Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        blocking(|| (&self.inner).read(buf))
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        blocking(|| (&self.inner).read_vectored(bufs))
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        blocking(|| (&self.inner).read_to_end(buf))
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        blocking(|| (&self.inner).read_to_string(buf))
    }
}

impl Write for &File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        blocking(|| (&self.inner).write(buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        blocking(|| (&self.inner).write_vectored(bufs))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        blocking(|| (&self.inner).write_all(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for &File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        blocking(|| (&self.inner).seek(pos))
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self).read_vectored(bufs)
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        (&*self).read_to_end(buf)
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        (&*self).read_to_string(buf)
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        (&*self).write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        (&*self).seek(pos)
    }
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}
