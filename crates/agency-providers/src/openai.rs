//! OpenAI Chat Completions and every server that speaks it.
