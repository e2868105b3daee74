//! The content-addressed artifact store: on disk (one file per digest,
//! written atomically, verified when read) or in memory.

use super::*;

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    crate::proto::hex(&Sha256::digest(bytes))
}

/// The hex digest of a reference, checked to be 64 lowercase hex digits (so
/// it is safe as a file name).
pub(crate) fn digest_hex(artifact: &ArtifactRef) -> Result<&str, JournalError> {
    let hex = artifact
        .digest
        .strip_prefix("sha256:")
        .ok_or_else(|| JournalError::Corrupt(format!("artifact digest `{}` is not sha256", artifact.digest)))?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(JournalError::Corrupt(format!("malformed artifact digest `{}`", artifact.digest)));
    }
    Ok(hex)
}

/// Checks stored bytes against their reference and parses them.
pub(crate) fn verify(artifact: &ArtifactRef, hex: &str, bytes: &[u8]) -> Result<serde_json::Value, JournalError> {
    if bytes.len() as u64 != artifact.size || sha256_hex(bytes) != hex {
        return Err(JournalError::Corrupt(format!("artifact {} does not match its digest", artifact.digest)));
    }
    serde_json::from_slice(bytes).map_err(|e| JournalError::Corrupt(format!("artifact {} is not JSON: {e}", artifact.digest)))
}

/// Content-addressed artifact store: the key of an artifact is the sha256 of
/// its canonical JSON (see [`artifact_ref`]).
pub trait ArtifactStore: Send {
    /// Stores a value and returns its reference; storing it again is a no-op.
    fn put(&mut self, value: &serde_json::Value) -> Result<ArtifactRef, JournalError>;
    /// Reads a value back, verifying its digest ([`JournalError::Corrupt`] on
    /// a mismatch or a missing artifact).
    fn get(&self, artifact: &ArtifactRef) -> Result<serde_json::Value, JournalError>;
    /// Stores bytes already encoded and digested by [`artifact_ref`] (the
    /// control plane's hot path: no second encoding or hashing).
    fn put_encoded(&mut self, artifact: &ArtifactRef, bytes: &[u8]) -> Result<(), JournalError>;
}

/// Artifacts as files `DIR/<hex[0..2]>/<hex>.json`, each written to a
/// temporary file and renamed into place (atomic).
#[derive(Debug)]
pub struct DirArtifacts {
    pub(super) dir: PathBuf,
    pub(super) fsync: bool,
}

impl DirArtifacts {
    /// Opens (creating) the store in `dir`, without fsync (see
    /// [`DirArtifacts::with_fsync`]).
    pub fn open(dir: &Path) -> Result<DirArtifacts, JournalError> {
        fs::create_dir_all(dir).map_err(|e| JournalError::Storage(format!("cannot create {}: {e}", dir.display())))?;
        Ok(DirArtifacts { dir: dir.to_path_buf(), fsync: false })
    }

    /// Whether each artifact file (and its directory) is fsynced before
    /// `put` returns, so it survives power loss.
    pub fn with_fsync(mut self, fsync: bool) -> DirArtifacts {
        self.fsync = fsync;
        self
    }

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file an artifact is stored in (whether or not it exists).
    pub fn path_of(&self, artifact: &ArtifactRef) -> Result<PathBuf, JournalError> {
        let hex = digest_hex(artifact)?;
        Ok(self.dir.join(&hex[..2]).join(format!("{hex}.json")))
    }

    pub(super) fn write_atomically(&self, shard: &Path, path: &Path, hex: &str, bytes: &[u8]) -> io::Result<()> {
        fs::create_dir_all(shard)?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = shard.join(format!(".{hex}.{}.{n}.tmp", std::process::id()));
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            file.write_all(bytes)?;
            if self.fsync {
                file.sync_all()?;
            }
            fs::rename(&temp, path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written?;
        if self.fsync {
            // Persist the rename itself (directories open read-only on Unix).
            #[cfg(unix)]
            fs::File::open(shard)?.sync_all()?;
        }
        Ok(())
    }
}

impl ArtifactStore for DirArtifacts {
    fn put(&mut self, value: &serde_json::Value) -> Result<ArtifactRef, JournalError> {
        let (artifact, bytes) = artifact_ref(value);
        let hex = digest_hex(&artifact)?;
        let shard = self.dir.join(&hex[..2]);
        let path = shard.join(format!("{hex}.json"));
        // Already stored with the right size: content addressing makes the
        // write idempotent. A damaged file of another size is rewritten.
        if fs::metadata(&path).map(|m| m.len() == artifact.size).unwrap_or(false) {
            return Ok(artifact);
        }
        self.write_atomically(&shard, &path, hex, &bytes)
            .map_err(|e| JournalError::Storage(format!("cannot write artifact {}: {e}", path.display())))?;
        Ok(artifact)
    }

    fn put_encoded(&mut self, artifact: &ArtifactRef, bytes: &[u8]) -> Result<(), JournalError> {
        let hex = digest_hex(artifact)?;
        let shard = self.dir.join(&hex[..2]);
        let path = shard.join(format!("{hex}.json"));
        if fs::metadata(&path).map(|m| m.len() == artifact.size).unwrap_or(false) {
            return Ok(());
        }
        self.write_atomically(&shard, &path, hex, bytes)
            .map_err(|e| JournalError::Storage(format!("cannot write artifact {}: {e}", path.display())))
    }

    fn get(&self, artifact: &ArtifactRef) -> Result<serde_json::Value, JournalError> {
        let hex = digest_hex(artifact)?;
        let path = self.dir.join(&hex[..2]).join(format!("{hex}.json"));
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(JournalError::Corrupt(format!("missing artifact {} ({})", artifact.digest, path.display())));
            }
            Err(e) => return Err(JournalError::Storage(format!("cannot read artifact {}: {e}", path.display()))),
        };
        verify(artifact, hex, &bytes)
    }
}

/// Artifacts in memory, verified like [`DirArtifacts`]; for tests and
/// benchmarks.
#[derive(Debug, Default)]
pub struct MemoryArtifacts {
    pub(super) by_digest: HashMap<String, Vec<u8>>,
}

impl MemoryArtifacts {
    /// An empty store.
    pub fn new() -> MemoryArtifacts {
        MemoryArtifacts::default()
    }

    /// How many distinct artifacts are stored.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

impl ArtifactStore for MemoryArtifacts {
    fn put(&mut self, value: &serde_json::Value) -> Result<ArtifactRef, JournalError> {
        let (artifact, bytes) = artifact_ref(value);
        self.by_digest.entry(artifact.digest.clone()).or_insert(bytes);
        Ok(artifact)
    }

    fn put_encoded(&mut self, artifact: &ArtifactRef, bytes: &[u8]) -> Result<(), JournalError> {
        if !self.by_digest.contains_key(&artifact.digest) {
            self.by_digest.insert(artifact.digest.clone(), bytes.to_vec());
        }
        Ok(())
    }

    fn get(&self, artifact: &ArtifactRef) -> Result<serde_json::Value, JournalError> {
        let hex = digest_hex(artifact)?;
        let bytes =
            self.by_digest.get(&artifact.digest).ok_or_else(|| JournalError::Corrupt(format!("missing artifact {}", artifact.digest)))?;
        verify(artifact, hex, bytes)
    }
}
