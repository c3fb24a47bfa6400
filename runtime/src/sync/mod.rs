//! Green-thread-aware synchronisation: primitives that park the waiting green thread (never
//! its worker's OS thread) and also work from plain OS threads.
