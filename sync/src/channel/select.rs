//! Waiting on several channel operations at once: [`Select`] (dynamic) and the
//! [`select!`](crate::select) macro, in crossbeam-channel's shape.
//!
//! A selection first tries every operation once, in a random order (so no operation starves
//! when several are ready). If none is ready it registers one node per operation, all owned by
//! one waiter (Go's select enqueues a sudog per case), and parks. The first operation that can
//! proceed claims the waiter through its node (waiter protocol: one CAS, so only one
//! operation wins); the select then unregisters the other nodes and completes the winner. For
//! the lock-free flavors a claim is a hint ("try me again now"); for the rendezvous flavor it
//! is the hand-off itself. A timer channel ([`after`](super::after)) has nobody to claim the
//! waiter: the selection parks no later than the earliest timer deadline among its
//! operations and looks again then (that timed park is the only timer an `after` ever costs).
//!
//! A selected operation is *reserved* (a slot claimed, a waiting counterpart claimed) and is
//! completed by [`SelectedOperation::send`] / [`SelectedOperation::recv`], which never block
//! (except in the rare retry described there).

use core::fmt;
use core::marker::PhantomData;
use std::time::{Duration, Instant};

use purloin_sched::WaitKind;

use super::array::ArrayToken;
use super::error::{RecvError, SelectTimeoutError, SendError, TrySelectError};
use super::list::ListToken;
use super::zero::ZeroToken;
use super::{Receiver, Sender};
use crate::diagnostics::wait_info;
use crate::waiter::{Gave, MAX_TOKEN, Node, OnInterrupt, Waiter};

/// Set in a claim token when the claim is a disconnection rather than a counterpart.
pub(crate) const DISCONNECTED: u32 = 1;

/// A reservation made by a flavor for an operation, completed later.
#[derive(Debug, Default)]
pub(crate) struct Token {
    pub(crate) array: ArrayToken,
    pub(crate) list: ListToken,
    pub(crate) zero: ZeroToken,
}

/// One end of a channel, seen by a selection.
pub(crate) trait SelectHandle {
    /// Reserves the operation if it can proceed now (into `token`).
    fn try_select(&self, token: &mut Token) -> bool;
    /// Links `node` (owned by waiter `me`) to be claimed when the operation may proceed;
    /// returns whether it may proceed already.
    ///
    /// # Safety
    ///
    /// - `node` is not linked, stays at its address until [`SelectHandle::unregister`], and
    ///   its waiter is `me`.
    unsafe fn register(&self, node: &mut Node, me: *const Waiter) -> bool;
    /// Unlinks `node` if still linked; `won` if the selection was claimed through it.
    fn unregister(&self, node: &Node, won: bool);
    /// After a claim through `node`: reserves the operation into `token` (true), or asks the
    /// selection to try again (false).
    ///
    /// # Safety
    ///
    /// - The selection was claimed through `node` with `claim`, and `node` is unregistered.
    unsafe fn accept(&self, token: &mut Token, node: &Node, claim: u32) -> bool;
    /// A claim through `node` will not be used (the selection is unwinding).
    ///
    /// # Safety
    ///
    /// - As for [`SelectHandle::accept`], which was not called.
    unsafe fn abandon(&self, node: &Node, claim: u32);
    /// A reservation in `token` will not be completed (a dropped [`SelectedOperation`]).
    ///
    /// # Safety
    ///
    /// - `token` holds a reservation of this handle's operation that was not completed.
    unsafe fn abandon_token(&self, token: &mut Token);
    /// When a waiting selection must wake up to find this operation ready without anyone
    /// claiming it (a timer channel's deadline); `None` if a claim will come.
    fn wake_at(&self) -> Option<Instant> {
        None
    }
}

/// How long a selection may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Timeout {
    Now,
    Never,
    At(Instant),
}

/// A selection's operation: the handle, the user's index, and the end's address (checked
/// when the operation is completed).
type Entry<'a> = (&'a dyn SelectHandle, usize, *const u8);

/// Picks a pseudo-random start for the first pass (fairness); deterministic under loom.
fn shuffle(entries: &mut [Entry<'_>]) {
    #[cfg(not(loom))]
    {
        use core::cell::Cell;
        thread_local! {
            static RNG: Cell<u32> = const { Cell::new(0x9E37_79B9) };
        }
        let n = entries.len();
        if n < 2 {
            return;
        }
        // Fisher–Yates with xorshift32. The value is read and written in one access (never
        // held across a scheduling point, so a green thread moving threads is harmless).
        let mut x = RNG.with(|r| r.get());
        for i in (1..n).rev() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let j = (x as usize) % (i + 1);
            entries.swap(i, j);
        }
        RNG.with(|r| r.set(x));
    }
    #[cfg(loom)]
    let _ = entries;
}

/// Runs a selection over `entries`; returns the reserved operation, or `None` if `timeout`
/// passed.
pub(crate) fn run_select<'a>(
    entries: &mut [Entry<'a>],
    timeout: Timeout,
) -> Option<(Token, usize, *const u8, &'a dyn SelectHandle)> {
    if entries.is_empty() {
        return match timeout {
            Timeout::Now => None,
            Timeout::Never => loop {
                // Nothing can ever be selected: wait forever (Go's empty `select {}`).
                let info = wait_info(WaitKind::Select, entries, None);
                let _ = Waiter::new().wait(None, info, OnInterrupt::Ignore);
            },
            Timeout::At(d) => {
                purloin_sched::sleep_until(d);
                None
            }
        };
    }
    assert!(
        entries.len() < (MAX_TOKEN >> 1) as usize,
        "purloin_sync::channel::Select: too many operations"
    );
    shuffle(entries);
    let mut token = Token::default();
    for &(h, i, p) in entries.iter() {
        if h.try_select(&mut token) {
            return Some((token, i, p, h));
        }
    }
    loop {
        let own = match timeout {
            Timeout::Now => return None,
            Timeout::Never => None,
            Timeout::At(d) => {
                if Instant::now() >= d {
                    return None;
                }
                Some(d)
            }
        };
        // A timer channel is never claimed: the wait ends by its deadline instead, when that
        // comes before the selection's own.
        let timers = entries.iter().filter_map(|e| e.0.wake_at()).min();
        let (deadline, own_deadline) = match (own, timers) {
            (Some(d), Some(t)) if t < d => (Some(t), false),
            (Some(d), _) => (Some(d), true),
            (None, t) => (t, false),
        };
        let waiter = Waiter::new();
        // A selection with a deadline of its own can end without an operation, so it also
        // ends when interrupted (leaving the interrupt pending); one without cannot.
        let on = if own.is_some() { OnInterrupt::Leave } else { OnInterrupt::Ignore };
        let (claim, gave) = if entries.len() <= INLINE {
            let mut nodes: [Node; INLINE] =
                core::array::from_fn(|j| Node::new(&waiter, (j as u32) << 1, 0));
            let nodes = &mut nodes[..entries.len()];
            wait_registered(entries, nodes, &waiter, deadline, on, &mut token)
        } else {
            let mut nodes: Vec<Node> =
                (0..entries.len()).map(|j| Node::new(&waiter, (j as u32) << 1, 0)).collect();
            wait_registered(entries, &mut nodes, &waiter, deadline, on, &mut token)
        };
        if let Some(j) = claim {
            let (h, i, p) = entries[j];
            return Some((token, i, p, h));
        }
        for &(h, i, p) in entries.iter() {
            if h.try_select(&mut token) {
                return Some((token, i, p, h));
            }
        }
        match gave {
            Some(Gave::TimedOut) if own_deadline => return None,
            Some(Gave::Interrupted) => return None,
            _ => {}
        }
    }
}

/// Operations up to this many keep their nodes on the stack (more use a `Vec`).
const INLINE: usize = 4;

/// Registers a node per operation, waits, unregisters. Returns the position of an operation
/// reserved into `token` through a claim (if any), and why the wait gave up (if it did).
fn wait_registered(
    entries: &[Entry<'_>],
    nodes: &mut [Node],
    waiter: &Waiter,
    deadline: Option<Instant>,
    on: OnInterrupt,
    token: &mut Token,
) -> (Option<usize>, Option<Gave>) {
    let mut guard = Registrations { entries, nodes, registered: 0, waiter };
    let mut ready = false;
    for j in 0..guard.entries.len() {
        let h = guard.entries[j].0;
        // SAFETY: the node is fresh, lives in the caller's frame until `guard` unregisters
        // it, and belongs to `waiter`.
        let now_ready = unsafe { h.register(&mut guard.nodes[j], waiter) };
        guard.registered = j + 1;
        if now_ready {
            ready = true;
            break;
        }
    }
    let (claim, gave) = if ready {
        (waiter.abort(), None)
    } else {
        let info = wait_info(WaitKind::Select, guard.entries, None);
        match waiter.wait(deadline, info, on) {
            Ok(c) => (Some(c), None),
            Err(gave) => (None, Some(gave)),
        }
    };
    let won = claim.map(|c| (c >> 1) as usize);
    guard.unregister_all(won);
    // Disarm: everything is unregistered.
    guard.registered = 0;
    drop(guard);
    match (claim, won) {
        (Some(c), Some(j)) => {
            // SAFETY: claimed through node `j` (registered at `j`), now unregistered.
            let ok = unsafe { entries[j].0.accept(token, &nodes[j], c) };
            (ok.then_some(j), None)
        }
        _ => (None, gave),
    }
}

/// The registered nodes of a selection; unregisters them if the selection unwinds (passing
/// on a claim it cannot use).
struct Registrations<'e, 'a> {
    entries: &'e [Entry<'a>],
    nodes: &'e mut [Node],
    registered: usize,
    waiter: &'e Waiter,
}

impl Registrations<'_, '_> {
    fn unregister_all(&mut self, won: Option<usize>) {
        for j in 0..self.registered {
            self.entries[j].0.unregister(&self.nodes[j], won == Some(j));
        }
    }
}

impl Drop for Registrations<'_, '_> {
    fn drop(&mut self) {
        if self.registered == 0 {
            return;
        }
        // Only reached while unwinding out of the wait.
        let claim = self.waiter.abort();
        let won = claim.map(|c| (c >> 1) as usize);
        self.unregister_all(won);
        if let (Some(c), Some(j)) = (claim, won) {
            // SAFETY: claimed through node `j`, now unregistered; `accept` was not called.
            unsafe { self.entries[j].0.abandon(&self.nodes[j], c) };
        }
    }
}

/// A selection over several send and receive operations, like crossbeam-channel's `Select`.
///
/// Add operations with [`send`](Select::send) and [`recv`](Select::recv) (each returns the
/// operation's index), then call one of the `select` methods: it returns a
/// [`SelectedOperation`] for one operation that can proceed, which you must complete with
/// [`SelectedOperation::send`] or [`SelectedOperation::recv`]. When several operations are
/// ready, one is chosen at random. A receive on a disconnected channel and a send on a channel
/// with no receivers count as ready (they complete with an error).
///
/// Most code uses the [`select!`](crate::select) macro instead.
///
/// # Examples
///
/// ```
/// use purloin_sync::channel::{Select, unbounded};
///
/// let (s1, r1) = unbounded::<i32>();
/// let (s2, r2) = unbounded::<&str>();
/// s2.send("hello").unwrap();
///
/// let mut sel = Select::new();
/// let i1 = sel.recv(&r1);
/// let i2 = sel.recv(&r2);
/// let oper = sel.select();
/// match oper.index() {
///     i if i == i1 => panic!("r1 is empty"),
///     i if i == i2 => assert_eq!(oper.recv(&r2), Ok("hello")),
///     _ => unreachable!(),
/// }
/// # drop(s1);
/// ```
pub struct Select<'a> {
    entries: Vec<Entry<'a>>,
    next_index: usize,
}

// SAFETY: the entries hold shared references to `Sender`s/`Receiver`s (which are `Sync` for
// every `T` that may cross threads, and the `SelectHandle` methods are only called through
// them) and addresses used only for identity checks.
unsafe impl Send for Select<'_> {}
// SAFETY: as for `Send`; `&Select` gives no access to the entries.
unsafe impl Sync for Select<'_> {}

impl<'a> Select<'a> {
    /// An empty selection.
    pub fn new() -> Select<'a> {
        Select { entries: Vec::with_capacity(INLINE), next_index: 0 }
    }

    /// Adds a send on `s`; returns its index.
    pub fn send<T>(&mut self, s: &'a Sender<T>) -> usize {
        let i = self.next_index;
        self.entries.push((s, i, (s as *const Sender<T>).cast()));
        self.next_index += 1;
        i
    }

    /// Adds a receive on `r`; returns its index.
    pub fn recv<T>(&mut self, r: &'a Receiver<T>) -> usize {
        let i = self.next_index;
        self.entries.push((r, i, (r as *const Receiver<T>).cast()));
        self.next_index += 1;
        i
    }

    /// Removes the operation with `index` (indices of the others do not change).
    ///
    /// # Panics
    ///
    /// If no operation has that index (never added, or already removed).
    pub fn remove(&mut self, index: usize) {
        let pos = self.entries.iter().position(|e| e.1 == index).unwrap_or_else(|| {
            panic!("purloin_sync::channel::Select::remove: no operation with index {index}")
        });
        self.entries.swap_remove(pos);
    }

    /// Selects an operation that can proceed now, without blocking.
    ///
    /// # Errors
    ///
    /// [`TrySelectError`] if none can.
    pub fn try_select(&mut self) -> Result<SelectedOperation<'a>, TrySelectError> {
        self.run(Timeout::Now).ok_or(TrySelectError)
    }

    /// Blocks (parks the green thread) until an operation can proceed, and selects it.
    /// With no operations it blocks forever. Not interruptible (it must select an operation):
    /// [`select_timeout`](Select::select_timeout) and `select!` with a `default(timeout)` arm
    /// are.
    pub fn select(&mut self) -> SelectedOperation<'a> {
        self.run(Timeout::Never).expect("a selection without a deadline always selects")
    }

    /// [`select`](Select::select) for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`SelectTimeoutError`] if no operation could proceed in time, or the calling green
    /// thread was interrupted first (the interrupt stays pending: see
    /// [`interrupted`](purloin_sched::interrupted)).
    pub fn select_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<SelectedOperation<'a>, SelectTimeoutError> {
        match Instant::now().checked_add(timeout) {
            Some(d) => self.select_deadline(d),
            None => Ok(self.select()),
        }
    }

    /// [`select`](Select::select) until `deadline`.
    ///
    /// # Errors
    ///
    /// [`SelectTimeoutError`] if no operation could proceed in time, or the calling green
    /// thread was interrupted first (the interrupt stays pending: see
    /// [`interrupted`](purloin_sched::interrupted)).
    pub fn select_deadline(
        &mut self,
        deadline: Instant,
    ) -> Result<SelectedOperation<'a>, SelectTimeoutError> {
        self.run(Timeout::At(deadline)).ok_or(SelectTimeoutError)
    }

    fn run(&mut self, timeout: Timeout) -> Option<SelectedOperation<'a>> {
        let (token, index, ptr, handle) = run_select(&mut self.entries, timeout)?;
        Some(SelectedOperation { token, index, ptr, handle, _marker: PhantomData })
    }
}

impl Default for Select<'_> {
    fn default() -> Self {
        Select::new()
    }
}

impl Clone for Select<'_> {
    fn clone(&self) -> Self {
        Select { entries: self.entries.clone(), next_index: self.next_index }
    }
}

impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select").field("operations", &self.entries.len()).finish()
    }
}

/// An operation chosen by a [`Select`], reserved and waiting to be completed.
///
/// # Panics
///
/// Dropping it without calling [`send`](SelectedOperation::send) or
/// [`recv`](SelectedOperation::recv) panics (as crossbeam-channel's does). A reserved receive
/// is released first (its message is dropped); a reserved send on a bounded or unbounded
/// channel cannot be released and leaves that channel unusable, so always complete the
/// operation (the [`select!`](crate::select) macro does).
#[must_use = "a selected operation must be completed with send() or recv()"]
pub struct SelectedOperation<'a> {
    token: Token,
    index: usize,
    ptr: *const u8,
    handle: &'a dyn SelectHandle,
    _marker: PhantomData<&'a ()>,
}

impl SelectedOperation<'_> {
    /// The index of the chosen operation (as returned when it was added).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Completes the chosen send with `msg`.
    ///
    /// # Errors
    ///
    /// [`SendError`] (returning `msg`) if every receiver was dropped.
    ///
    /// # Panics
    ///
    /// If `s` is not the sender of the chosen operation.
    pub fn send<T>(mut self, s: &Sender<T>, msg: T) -> Result<(), SendError<T>> {
        assert!(
            core::ptr::eq(s as *const Sender<T> as *const u8, self.ptr),
            "purloin_sync::channel::SelectedOperation::send: passed a sender that was not \
             selected (use the one added at this index)"
        );
        // SAFETY: the token holds this sender's reservation (checked just above).
        let r = unsafe { s.complete(&mut self.token, msg) };
        core::mem::forget(self);
        r
    }

    /// Completes the chosen receive.
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the channel is empty and every sender was dropped.
    ///
    /// # Panics
    ///
    /// If `r` is not the receiver of the chosen operation.
    pub fn recv<T>(mut self, r: &Receiver<T>) -> Result<T, RecvError> {
        assert!(
            core::ptr::eq(r as *const Receiver<T> as *const u8, self.ptr),
            "purloin_sync::channel::SelectedOperation::recv: passed a receiver that was not \
             selected (use the one added at this index)"
        );
        // SAFETY: the token holds this receiver's reservation (checked just above).
        let res = unsafe { r.complete(&mut self.token) };
        core::mem::forget(self);
        res
    }
}

impl fmt::Debug for SelectedOperation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectedOperation").field("index", &self.index).finish_non_exhaustive()
    }
}

impl Drop for SelectedOperation<'_> {
    fn drop(&mut self) {
        // SAFETY: the reservation was not completed (completing forgets `self`).
        unsafe { self.handle.abandon_token(&mut self.token) };
        if !crate::loom::thread::panicking() {
            panic!(
                "purloin_sync::channel: a SelectedOperation was dropped without completing \
                 it; call its send() or recv()"
            );
        }
    }
}

/// Waits on several channel operations and runs the arm of the one that proceeds, in
/// crossbeam-channel's syntax.
///
/// ```text
/// select! {
///     recv(receiver) -> result => expression,
///     send(sender, message) -> result => expression,
///     default => expression,              // optional: do not block
///     default(duration) => expression,    // or: block at most `duration`
/// }
/// ```
///
/// `result` is a pattern for `Result<T, RecvError>` (receive) or `Result<(), SendError<T>>`
/// (send). A send's message expression is evaluated only if that send is chosen. When several
/// operations are ready one is chosen at random, so no arm starves. Blocking parks the green
/// thread (or the OS thread outside a green thread). Arms may `break`, `continue` or `return`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin_sync::select;
/// use purloin_sync::channel::bounded;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let (tx, rx) = bounded::<u32>(0);
/// let (quit_tx, quit_rx) = bounded::<()>(0);
/// sched.spawn(move || {
///     for i in 0..3 {
///         tx.send(i).unwrap();
///     }
///     // A rendezvous: returns once the loop below took it (`tx` stays alive until then).
///     quit_tx.send(()).unwrap();
/// });
/// let mut got = Vec::new();
/// loop {
///     select! {
///         recv(rx) -> msg => got.push(msg.unwrap()),
///         recv(quit_rx) -> _ => break,
///         default(Duration::from_secs(10)) => panic!("timed out"),
///     }
/// }
/// assert_eq!(got, [0, 1, 2]);
/// ```
#[macro_export]
macro_rules! select {
    ($($tokens:tt)*) => {
        $crate::__select_internal!(@parse [] [] $($tokens)*)
    };
}

/// Implementation detail of [`select!`](crate::select).
#[doc(hidden)]
#[macro_export]
macro_rules! __select_internal {
    // ---- parsing: normalise the arms -------------------------------------------------------
    (@parse [$($arms:tt)*] [$($default:tt)*]) => {
        $crate::__select_internal!(@start [$($arms)*] [$($default)*])
    };
    (@parse [$($arms:tt)*] [$($d:tt)*] recv($r:expr) -> $p:pat => $body:block $(,)? $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)* (recv ($r) ($p) ($body))] [$($d)*] $($rest)*)
    };
    (@parse [$($arms:tt)*] [$($d:tt)*] recv($r:expr) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)* (recv ($r) ($p) ($body))] [$($d)*] $($rest)*)
    };
    (@parse [$($arms:tt)*] [$($d:tt)*] recv($r:expr) -> $p:pat => $body:expr) => {
        $crate::__select_internal!(@parse [$($arms)* (recv ($r) ($p) ($body))] [$($d)*])
    };
    (@parse [$($arms:tt)*] [$($d:tt)*] send($s:expr, $m:expr) -> $p:pat => $body:block $(,)? $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)* (send ($s) ($m) ($p) ($body))] [$($d)*] $($rest)*)
    };
    (@parse [$($arms:tt)*] [$($d:tt)*] send($s:expr, $m:expr) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)* (send ($s) ($m) ($p) ($body))] [$($d)*] $($rest)*)
    };
    (@parse [$($arms:tt)*] [$($d:tt)*] send($s:expr, $m:expr) -> $p:pat => $body:expr) => {
        $crate::__select_internal!(@parse [$($arms)* (send ($s) ($m) ($p) ($body))] [$($d)*])
    };
    (@parse [$($arms:tt)*] [] default => $body:block $(,)? $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)*] [(now) ($body)] $($rest)*)
    };
    (@parse [$($arms:tt)*] [] default => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)*] [(now) ($body)] $($rest)*)
    };
    (@parse [$($arms:tt)*] [] default => $body:expr) => {
        $crate::__select_internal!(@parse [$($arms)*] [(now) ($body)])
    };
    (@parse [$($arms:tt)*] [] default($t:expr) => $body:block $(,)? $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)*] [(timeout $t) ($body)] $($rest)*)
    };
    (@parse [$($arms:tt)*] [] default($t:expr) => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse [$($arms)*] [(timeout $t) ($body)] $($rest)*)
    };
    (@parse [$($arms:tt)*] [] default($t:expr) => $body:expr) => {
        $crate::__select_internal!(@parse [$($arms)*] [(timeout $t) ($body)])
    };
    (@parse [$($arms:tt)*] [$($d:tt)+] default $($rest:tt)*) => {
        ::core::compile_error!("select!: more than one `default` arm")
    };
    (@parse [$($arms:tt)*] [$($d:tt)*] $($rest:tt)+) => {
        ::core::compile_error!(
            "select!: expected `recv(r) -> res => body`, `send(s, msg) -> res => body`, \
             `default => body` or `default(timeout) => body`, separated by commas"
        )
    };

    // ---- code generation ------------------------------------------------------------------
    // Each arm binds its end (`__handle`) and index (`__index`) in a nested block and passes
    // the two identifiers on; the innermost block selects and dispatches with an `if` chain
    // in which every body is in tail position (so diverging bodies cause no warnings).
    (@start [$($arms:tt)*] [$($default:tt)*]) => {{
        let mut __select = $crate::channel::Select::new();
        $crate::__select_internal!(@arm __select [$($arms)*] [$($default)*] [])
    }};
    (@arm $sel:ident [(recv ($r:expr) ($p:pat) ($body:expr)) $($rest:tt)*] [$($default:tt)*] [$($dispatch:tt)*]) => {{
        let __handle = &$r;
        let __index = $sel.recv(__handle);
        $crate::__select_internal!(
            @arm $sel [$($rest)*] [$($default)*]
            [$($dispatch)* (recv __handle __index ($p) ($body))]
        )
    }};
    (@arm $sel:ident [(send ($s:expr) ($m:expr) ($p:pat) ($body:expr)) $($rest:tt)*] [$($default:tt)*] [$($dispatch:tt)*]) => {{
        let __handle = &$s;
        let __index = $sel.send(__handle);
        $crate::__select_internal!(
            @arm $sel [$($rest)*] [$($default)*]
            [$($dispatch)* (send __handle __index ($m) ($p) ($body))]
        )
    }};
    (@arm $sel:ident [] [] [$($dispatch:tt)*]) => {{
        let __oper = $sel.select();
        $crate::__select_internal!(@dispatch __oper [$($dispatch)*])
    }};
    (@arm $sel:ident [] [(now) ($body:expr)] [$($dispatch:tt)*]) => {
        match $sel.try_select() {
            ::core::result::Result::Ok(__oper) => {
                $crate::__select_internal!(@dispatch __oper [$($dispatch)*])
            }
            ::core::result::Result::Err(_) => $body,
        }
    };
    (@arm $sel:ident [] [(timeout $t:expr) ($body:expr)] [$($dispatch:tt)*]) => {
        match $sel.select_timeout($t) {
            ::core::result::Result::Ok(__oper) => {
                $crate::__select_internal!(@dispatch __oper [$($dispatch)*])
            }
            ::core::result::Result::Err(_) => $body,
        }
    };
    (@dispatch $oper:ident [(recv $h:ident $i:ident ($p:pat) ($body:expr)) $($rest:tt)*]) => {
        if $oper.index() == $i {
            let $p = $oper.recv($h);
            $body
        } else {
            $crate::__select_internal!(@dispatch $oper [$($rest)*])
        }
    };
    (@dispatch $oper:ident [(send $h:ident $i:ident ($m:expr) ($p:pat) ($body:expr)) $($rest:tt)*]) => {
        if $oper.index() == $i {
            let $p = $oper.send($h, $m);
            $body
        } else {
            $crate::__select_internal!(@dispatch $oper [$($rest)*])
        }
    };
    (@dispatch $oper:ident []) => {{
        ::core::mem::drop($oper);
        ::core::unreachable!("select!: the selected operation matches no arm")
    }};
}
