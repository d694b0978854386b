//! What each command does, one module per area; `main` dispatches to them.

pub mod agencies;
pub mod chat;
pub mod eval;
pub mod keys;
pub mod serve;
