//! Labels on green threads: key/value pairs (pprof's profiler labels) that a green thread
//! carries, that the green threads it spawns inherit, and that dumps and the trace show.
//!
//! Label the work a green thread does for a region with [`with`] (Go's `pprof.Do`): the labels
//! are added to the green thread's own for the closure's run and put back afterwards, also if
//! it panics. Every green thread spawned inside (and, in turn, everything those spawn) starts
//! with them. [`labels!`](crate::labels!) builds a set; [`current`] reads the running green
//! thread's.
//!
//! Where they show:
//! - [`debugging::dump`](crate::debugging::dump): a `labels: k=v, ...` line under each
//!   green thread whose labels a dump can read: the parked ones (held while their stacks are
//!   walked) and the caller;
//! - [`debugging::dump_grouped`](crate::debugging::dump_grouped): labels are part of a
//!   group's key, so "12000 × parked" splits by tenant or route;
//! - the trace ([`trace`](crate::trace)): each run slice's arguments hold the green thread's
//!   labels as they were when it was switched in.
//!
//! A green thread's labels are one shared pointer in its record: a spawn from a labelled green
//! thread copies it (one reference count), a spawn from an unlabelled one does nothing more
//! than before. Labelled green threads spawn eagerly (a lazily spawned child has no record to
//! carry them until it runs).
//!
//! # Examples
//!
//! ```
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     purloin::labels::with(purloin::labels!("route" => "/login", "tenant" => 7), || {
//!         let child = purloin::spawn(|| purloin::labels::current());
//!         let inherited = child.join().unwrap().unwrap();
//!         assert_eq!(inherited.get("route"), Some("/login"));
//!         assert_eq!(inherited.get("tenant"), Some("7"));
//!     });
//!     // Put back when the region ends.
//!     assert_eq!(purloin::labels::current(), None);
//! });
//! ```

pub use purloin_sched::Labels;

/// The running green thread's labels, or the calling plain thread's (`None` when it has none).
///
/// # Examples
///
/// ```
/// assert_eq!(purloin::labels::current(), None);
/// ```
pub fn current() -> Option<Labels> {
    purloin_sched::current_labels()
}

/// Runs `f` with `labels` added to the running green thread's labels (a key it already has
/// takes the new value), then puts its old labels back, also when `f` panics (Go's
/// `pprof.Do`). Green threads spawned inside inherit the labels in force when they are spawned.
/// On a plain thread (`main`) the labels are the thread's own for the region, and the green
/// threads it spawns inherit them the same way.
///
/// # Examples
///
/// ```
/// let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
/// rt.block_on(|| {
///     purloin::labels::with(purloin::labels!("stage" => "outer"), || {
///         purloin::labels::with(purloin::labels!("stage" => "inner", "k" => "v"), || {
///             let l = purloin::labels::current().unwrap();
///             assert_eq!(l.to_string(), "k=v, stage=inner");
///         });
///         assert_eq!(purloin::labels::current().unwrap().to_string(), "stage=outer");
///     });
/// });
/// ```
pub fn with<R>(labels: Labels, f: impl FnOnce() -> R) -> R {
    let _region = Region::enter(labels);
    f()
}

/// A region with labels added to the current green thread's (or plain thread's) labels; the
/// old ones come back when it is dropped, by return or by unwinding. A guard rather than a
/// closure, so that a `#[track_caller]` spawn inside the region still records its caller.
pub(crate) struct Region(Option<Option<Labels>>);

impl Region {
    /// Adds `labels` (a key already present takes the new value) until the region is dropped.
    pub(crate) fn enter(labels: Labels) -> Region {
        let old = purloin_sched::current_labels();
        let new = match &old {
            Some(old) => old.merged(&labels),
            None => labels,
        };
        purloin_sched::set_current_labels(Some(new));
        Region(Some(old))
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(old) = self.0.take() {
            purloin_sched::set_current_labels(old);
        }
    }
}

/// Builds [`Labels`] from `key => value` pairs; keys and values are anything that implements
/// `Display` (a later pair wins for a repeated key).
///
/// # Examples
///
/// ```
/// let user = 42;
/// let l = purloin::labels!("route" => "/cart", "user" => user);
/// assert_eq!(l.get("user"), Some("42"));
/// assert_eq!(l.len(), 2);
/// ```
#[macro_export]
macro_rules! labels {
    () => {
        $crate::labels::Labels::new(::std::iter::empty::<(::std::string::String, ::std::string::String)>())
    };
    ($($key:expr => $value:expr),+ $(,)?) => {
        $crate::labels::Labels::new([
            $((::std::string::ToString::to_string(&$key), ::std::string::ToString::to_string(&$value))),*
        ])
    };
}
