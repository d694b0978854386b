//! Anthropic Messages, as the fake speaks it.
