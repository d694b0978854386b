//! Anthropic Messages API.
