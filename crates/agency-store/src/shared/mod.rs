//! What both backends share: the SQL text and the rows it reads and writes, with their
//! conversions to and from the domain.

pub(crate) mod memory;
pub(crate) mod memory_sql;
pub(crate) mod rooms;
pub(crate) mod rows;
pub(crate) mod sql;
