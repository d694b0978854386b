//! Provider keys (and accounts' MCP credentials, under `mcp:` names) at rest: sealed with
//! XChaCha20-Poly1305 under the server's master key, the owner and provider bound in as
//! associated data (a sealed key moved to another row does not open). The master key comes from
//! `AGENCY_MASTER_KEY` (64 hex digits) or from a file, created with mode 0600 the first time a
//! key is stored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agency_store::{SealedKey, Store};
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use chrono::Utc;
use secrecy::{ExposeSecret, SecretBox, SecretString};

use crate::RuntimeError;

/// The environment variable that may hold the master key.
pub const MASTER_KEY_ENV: &str = "AGENCY_MASTER_KEY";

/// The name an account's credentials for its MCP server `server` are sealed under, beside its
/// provider keys (whose names cannot hold `:`).
pub(crate) fn credentials_name(server: &str) -> String {
    format!("{CREDENTIALS_PREFIX}{server}")
}

/// What the names of sealed MCP credentials start with (see [`credentials_name`]): they are
/// not provider keys.
pub(crate) const CREDENTIALS_PREFIX: &str = "mcp:";

/// Where the master key lives.
#[derive(Clone, Debug)]
pub enum MasterKeySource {
    /// 64 hex digits, e.g. from `AGENCY_MASTER_KEY`.
    Hex(SecretString),
    /// A file holding 64 hex digits; created (mode 0600) when first needed.
    File(PathBuf),
}

/// Key files as last read, with when they were written and their length.
type ReadKeys = HashMap<PathBuf, ((std::time::SystemTime, u64), SecretBox<[u8; 32]>)>;
static READ: std::sync::LazyLock<Mutex<ReadKeys>> = std::sync::LazyLock::new(Default::default);

/// The 32-byte key every stored provider key is sealed under.
pub struct MasterKey(SecretBox<[u8; 32]>);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(…)")
    }
}

fn invalid(what: impl Into<String>) -> RuntimeError {
    RuntimeError::Invalid(what.into())
}

impl MasterKey {
    pub fn generate() -> Self {
        Self(SecretBox::new(Box::new(random32())))
    }

    fn from_hex(hex: &str) -> Result<Self, RuntimeError> {
        let bytes = crate::hex::decode32(hex)
            .ok_or_else(|| invalid("the master key must be 64 hexadecimal digits (32 bytes)"))?;
        Ok(Self(SecretBox::new(Box::new(bytes))))
    }

    fn to_hex(&self) -> String {
        crate::hex::encode(self.0.expose_secret())
    }

    /// Loads the key; `None` when it is a file that does not exist yet. A file is read once
    /// and again only when it changes (a rotation by another process), so the calls that need
    /// the key — every bot call derives its caller key — cost a `stat`, not a read.
    pub fn load(source: &MasterKeySource) -> Result<Option<Self>, RuntimeError> {
        match source {
            MasterKeySource::Hex(hex) => Self::from_hex(hex.expose_secret()).map(Some),
            MasterKeySource::File(path) => Self::load_file(path),
        }
    }

    fn load_file(path: &Path) -> Result<Option<Self>, RuntimeError> {
        let unreadable = |e: std::io::Error| {
            invalid(format!(
                "cannot read the master key {}: {e}",
                path.display()
            ))
        };
        let stamp = match std::fs::metadata(path) {
            Ok(m) => (m.modified().map_err(unreadable)?, m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e)),
        };
        let mut read = READ
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, key)) = read.get(path)
            && *at == stamp
        {
            return Ok(Some(Self(SecretBox::new(Box::new(*key.expose_secret())))));
        }
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e)),
        };
        let key = Self::from_hex(&text).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
        read.insert(
            path.to_path_buf(),
            (stamp, SecretBox::new(Box::new(*key.0.expose_secret()))),
        );
        Ok(Some(key))
    }

    /// Loads the key, creating its file (mode 0600) when there is none yet.
    pub fn load_or_create(source: &MasterKeySource) -> Result<Self, RuntimeError> {
        if let Some(key) = Self::load(source)? {
            return Ok(key);
        }
        let MasterKeySource::File(path) = source else {
            return Err(invalid("no master key"));
        };
        let key = Self::generate();
        write_private(path, &key.to_hex(), true)?;
        tracing::info!(path = %path.display(), "created the master key file");
        Ok(key)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&Key::from(*self.0.expose_secret()))
    }

    /// Seals `key` for `owner`'s provider `provider`.
    pub fn seal(
        &self,
        owner: &str,
        provider: &str,
        key: &SecretString,
    ) -> Result<SealedKey, RuntimeError> {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = associated_data(owner, provider);
        let sealed = self
            .cipher()
            .encrypt(
                &nonce,
                Payload {
                    msg: key.expose_secret().as_bytes(),
                    aad: &aad,
                },
            )
            .map_err(|_| invalid("cannot seal the key"))?;
        let suffix: String = {
            let chars: Vec<char> = key.expose_secret().chars().collect();
            chars[chars.len().saturating_sub(4)..].iter().collect()
        };
        Ok(SealedKey {
            owner: owner.to_string(),
            provider: provider.to_string(),
            nonce: nonce.to_vec(),
            sealed,
            suffix,
            created_at: Utc::now(),
        })
    }

    /// A secret derived from this key for `purpose` (HMAC-SHA256): the same every time, so
    /// there is nothing to store, and it changes when the master key does.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        // HMAC takes a key of any length: this cannot fail.
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(self.0.expose_secret())
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Opens a sealed key; fails when this is not the key it was sealed under, or the row was
    /// tampered with.
    pub fn open(&self, sealed: &SealedKey) -> Result<SecretString, RuntimeError> {
        let nonce: [u8; 24] = sealed
            .nonce
            .as_slice()
            .try_into()
            .map_err(|_| invalid("a stored key is damaged (bad nonce)"))?;
        let aad = associated_data(&sealed.owner, &sealed.provider);
        let plain = self
            .cipher()
            .decrypt(&XNonce::from(nonce), Payload { msg: &sealed.sealed, aad: &aad })
            .map_err(|_| {
                invalid(format!(
                    "the stored key for provider `{}` does not open with this master key (was the master key replaced?)",
                    sealed.provider
                ))
            })?;
        String::from_utf8(plain)
            .map(SecretString::from)
            .map_err(|_| invalid("a stored key is damaged (not text)"))
    }
}

/// A password for one run of this process (hex of 32 bytes from the operating system's random
/// source), e.g. the embedded MQTT broker's server login.
pub fn random_password() -> SecretString {
    crate::hex::encode(&random32()).into()
}

/// 32 bytes from the operating system's random source.
pub(crate) fn random32() -> [u8; 32] {
    use chacha20poly1305::aead::rand_core::RngCore;
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    bytes
}

fn associated_data(owner: &str, provider: &str) -> Vec<u8> {
    format!("agency provider key\0{owner}\0{provider}").into_bytes()
}

/// Writes `text` to `path`, readable by its owner only. `create_new`: fail if it exists.
fn write_private(path: &Path, text: &str, create_new: bool) -> Result<(), RuntimeError> {
    use std::io::Write;
    let fail = |e: std::io::Error| {
        invalid(format!(
            "cannot write the master key {}: {e}",
            path.display()
        ))
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(fail)?;
    file.write_all(format!("{text}\n").as_bytes())
        .map_err(fail)?;
    file.sync_all().map_err(fail)
}

/// Where a rotation stages the new key: `agency.key` → `agency.key.new`.
fn staged_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".new");
    PathBuf::from(name)
}

/// Stores `owner`'s key for `provider`, sealed.
pub async fn store_provider_key(
    store: &dyn Store,
    source: &MasterKeySource,
    owner: &str,
    provider: &str,
    key: &SecretString,
) -> Result<SealedKey, RuntimeError> {
    if key.expose_secret().trim().is_empty() {
        return Err(invalid("the key is empty"));
    }
    let master = MasterKey::load_or_create(source)?;
    let sealed = master.seal(owner, provider, key)?;
    store.put_provider_key(&sealed).await?;
    Ok(sealed)
}

/// `owner`'s stored key for `provider`, opened; `None` when none is stored.
pub async fn provider_key(
    store: &dyn Store,
    source: &MasterKeySource,
    owner: &str,
    provider: &str,
) -> Result<Option<SecretString>, RuntimeError> {
    let Some(sealed) = store.provider_key(owner, provider).await? else {
        return Ok(None);
    };
    let master = MasterKey::load(source)?
        .ok_or_else(|| invalid("keys are stored but the master key is missing: restore its file or set AGENCY_MASTER_KEY"))?;
    match master.open(&sealed) {
        Ok(key) => Ok(Some(key)),
        // A rotation stopped between re-sealing the rows and replacing the file.
        Err(e) => match source {
            MasterKeySource::File(path) => {
                match MasterKey::load(&MasterKeySource::File(staged_path(path)))? {
                    Some(staged) => staged.open(&sealed).map(Some).map_err(|_| e),
                    None => Err(e),
                }
            }
            MasterKeySource::Hex(_) => Err(e),
        },
    }
}

/// Re-seals every stored key under a new master key and replaces the key file. Returns how
/// many keys were re-sealed. Only a file-held master key can be rotated here; with
/// `AGENCY_MASTER_KEY`, the new key is returned for the operator to install.
pub async fn rotate_master_key(
    store: &dyn Store,
    source: &MasterKeySource,
) -> Result<(usize, Option<String>), RuntimeError> {
    let keys = store.all_provider_keys().await?;
    let old = match MasterKey::load(source)? {
        Some(k) => k,
        None if keys.is_empty() => MasterKey::generate(),
        None => {
            return Err(invalid(
                "keys are stored but the master key is missing: cannot rotate",
            ));
        }
    };
    let new = MasterKey::generate();
    let mut resealed = Vec::with_capacity(keys.len());
    for k in &keys {
        let plain = old.open(k)?;
        let mut again = new.seal(&k.owner, &k.provider, &plain)?;
        again.created_at = k.created_at;
        again.suffix.clone_from(&k.suffix);
        resealed.push(again);
    }
    match source {
        MasterKeySource::File(path) => {
            // The new key is on disk (beside the old one) before any row changes, so a crash
            // in between loses nothing: `<file>.new` opens the re-sealed rows.
            let staged = staged_path(path);
            write_private(&staged, &new.to_hex(), false)?;
            store.reseal_provider_keys(&resealed).await?;
            std::fs::rename(&staged, path)
                .map_err(|e| invalid(format!("cannot replace {}: {e}", path.display())))?;
            Ok((resealed.len(), None))
        }
        MasterKeySource::Hex(_) => {
            store.reseal_provider_keys(&resealed).await?;
            Ok((resealed.len(), Some(new.to_hex())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_keys_open_only_where_they_were_sealed() {
        let m = MasterKey::generate();
        let key = SecretString::from("sk-test-1234567890abcd");
        let sealed = m.seal("local", "openai", &key).unwrap();
        assert_eq!(sealed.suffix, "abcd");
        assert!(
            !sealed.sealed.windows(4).any(|w| w == b"1234"),
            "the key is not in clear"
        );
        assert_eq!(
            m.open(&sealed).unwrap().expose_secret(),
            key.expose_secret()
        );
        // Another row, another owner, or another master key: it does not open.
        let mut moved = sealed.clone();
        moved.provider = "anthropic".into();
        assert!(m.open(&moved).is_err());
        let mut other = sealed.clone();
        other.owner = "mallory".into();
        assert!(m.open(&other).is_err());
        assert!(MasterKey::generate().open(&sealed).is_err());
        assert_eq!(format!("{m:?}"), "MasterKey(…)");
    }

    #[test]
    fn the_key_file_is_private_and_hex() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agency.key");
        let source = MasterKeySource::File(path.clone());
        assert!(MasterKey::load(&source).unwrap().is_none());
        let k = MasterKey::load_or_create(&source).unwrap();
        let again = MasterKey::load_or_create(&source).unwrap();
        assert_eq!(k.to_hex(), again.to_hex());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        assert!(MasterKey::load(&MasterKeySource::Hex(SecretString::from("abc"))).is_err());
        let hex = MasterKeySource::Hex(SecretString::from(k.to_hex()));
        assert_eq!(MasterKey::load(&hex).unwrap().unwrap().to_hex(), k.to_hex());
    }

    #[test]
    fn a_key_file_is_read_again_only_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agency.key");
        let source = MasterKeySource::File(path.clone());
        let first = MasterKey::load_or_create(&source).unwrap().to_hex();
        assert_eq!(MasterKey::load(&source).unwrap().unwrap().to_hex(), first);
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        // Other bytes under the same stamp (time and length): what was read is kept.
        let other = MasterKey::generate().to_hex();
        let original = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{other}{}", &original[other.len()..])).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(written)
            .unwrap();
        assert_eq!(MasterKey::load(&source).unwrap().unwrap().to_hex(), first);
        // A file written again (a rotation) is read again.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(written + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(MasterKey::load(&source).unwrap().unwrap().to_hex(), other);
        std::fs::remove_file(&path).unwrap();
        assert!(MasterKey::load(&source).unwrap().is_none());
    }
}
