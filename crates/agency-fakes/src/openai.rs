//! OpenAI Chat Completions, as the fake speaks it.
