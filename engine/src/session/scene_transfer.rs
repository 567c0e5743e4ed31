//! The scene a guest builds comes from the host at join: the host's accept names the scene's length and content
//! hash ([`SceneOffer`]), and the guest pulls the scene in chunks under the MTU until it holds all of them and the
//! hash matches. Guests need no local copy of the scene.
//!
//! Transfer datagrams travel on the unreliable channel, each starting with [`SCENE_TRANSFER_ID`] (distinct from
//! the state packets' and the control messages' protocol ids, so a receiver tells them apart from the first two
//! bytes). The guest asks for chunks it lacks, at most [`MAX_REQUESTED_CHUNKS`] per request, and asks again
//! after a silence; the host answers a joined guest's request with the chunks, so a lost datagram costs one retry
//! and the host keeps no transfer state. The scene travels as compact RON ([`SceneSpec::to_ron_compact`])
//! deflated (miniz_oxide): the katamari's 901 objects take 3 chunks instead of 62.
//!
//! A guest refuses, with a [`SceneTransferError`], an offer larger than [`MAX_SCENE_BYTES`], a chunk whose index
//! or length does not fit the offer, bytes whose hash is not the offer's, bytes that do not inflate to at most
//! [`MAX_SCENE_BYTES`] (a decompression bomb stops at the limit), and text that is not a valid scene.

use physync_codec::bitpack::{BitReadStream, BitWriteStream};
use physync_codec::{CodecError, Ctx, Stream};
use siphasher::sip::SipHasher24;
use std::hash::Hasher;

use crate::transport::MAX_DATAGRAM_PAYLOAD;
use crate::world::scene::{SceneError, SceneSpec};

/// The first two bytes of every scene transfer datagram.
pub const SCENE_TRANSFER_ID: u16 = 0x5343;

/// Scene bytes per chunk: a chunk datagram (id, kind, index, length, bytes) stays under
/// [`MAX_DATAGRAM_PAYLOAD`].
pub const SCENE_CHUNK_BYTES: usize = 1100;

/// Largest scene a host offers or a guest accepts, in bytes of compact RON and of its deflated form (1 MiB).
pub const MAX_SCENE_BYTES: usize = 1 << 20;

/// miniz_oxide's compression level for scenes (0 to 10): the default, fast and within a few per cent of the best.
const DEFLATE_LEVEL: u8 = 6;

/// Most chunks one request names.
pub const MAX_REQUESTED_CHUNKS: usize = 16;

const ID: Ctx = Ctx::user(20, "scene transfer id");
const KIND: Ctx = Ctx::user(21, "scene transfer kind");
const INDEX: Ctx = Ctx::user(22, "scene chunk index");
const LEN: Ctx = Ctx::user(23, "scene chunk length");
const BYTE: Ctx = Ctx::user(24, "scene byte");
const COUNT: Ctx = Ctx::user(25, "requested chunks");
const OFFER: Ctx = Ctx::user(26, "scene offer");

/// What the host's accept says about the scene: how long it is and its content hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SceneOffer {
    /// Length of the scene in bytes.
    pub len: u32,
    /// SipHash-2-4 (zero key) of the bytes.
    pub hash: u64,
}

impl SceneOffer {
    /// Number of chunks the scene takes.
    pub fn chunk_count(&self) -> usize {
        (self.len as usize).div_ceil(SCENE_CHUNK_BYTES)
    }

    /// The offer in a control message: length, then hash.
    pub fn serialize<S: Stream>(&mut self, s: &mut S) -> Result<(), CodecError> {
        s.count(OFFER, &mut self.len, MAX_SCENE_BYTES as u32)?;
        let mut high = (self.hash >> 32) as u32;
        let mut low = self.hash as u32;
        s.bits(OFFER, &mut high, 32)?;
        s.bits(OFFER, &mut low, 32)?;
        self.hash = (u64::from(high) << 32) | u64::from(low);
        Ok(())
    }
}

/// The content hash of scene bytes.
pub fn scene_hash(bytes: &[u8]) -> u64 {
    let mut h = SipHasher24::new_with_keys(0, 0);
    h.write(bytes);
    h.finish()
}

/// One scene transfer datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferMessage {
    /// Guest to host: send me these chunks.
    Request {
        /// Chunk indices, at most [`MAX_REQUESTED_CHUNKS`].
        chunks: Vec<u16>,
    },
    /// Host to guest: one chunk of the scene.
    Chunk {
        /// Its index.
        index: u16,
        /// Its bytes, at most [`SCENE_CHUNK_BYTES`].
        bytes: Vec<u8>,
    },
}

/// Why a transfer datagram, or the scene it carries, is refused. What a guest shows when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SceneTransferError {
    /// A transfer datagram from the host did not decode (truncated, oversized or garbage).
    #[error("malformed scene transfer datagram from the host")]
    Malformed,
    /// The host offered a scene larger than this guest accepts.
    #[error("the host's scene is {len} bytes, more than the {max} this guest accepts")]
    TooLarge {
        /// The offered length.
        len: u32,
        /// The limit.
        max: usize,
    },
    /// A chunk's index is past the offer's chunk count.
    #[error("scene chunk {index} is past the offer's {count} chunks")]
    ChunkIndex {
        /// The index received.
        index: u16,
        /// Chunks in the offer.
        count: usize,
    },
    /// A chunk is shorter or longer than its place in the offer (a truncated chunk).
    #[error("scene chunk {index} holds {len} bytes where the offer needs {expected}")]
    ChunkLength {
        /// The chunk.
        index: u16,
        /// Bytes received.
        len: usize,
        /// Bytes its place needs.
        expected: usize,
    },
    /// The assembled bytes do not hash to the offer's hash: corrupted, or not the scene the host offered.
    #[error("scene content hash {found:#018x} does not match the host's {expected:#018x}")]
    HashMismatch {
        /// The offer's hash.
        expected: u64,
        /// The hash of what arrived.
        found: u64,
    },
    /// The bytes hash right but do not inflate, or inflate past the limit.
    #[error("the host's scene is not deflated data of at most {max} bytes")]
    Inflate {
        /// The limit on the inflated scene.
        max: usize,
    },
    /// The bytes hash right but are not a valid scene (a host built from an incompatible version).
    #[error("the host's scene is not a valid scene for this engine")]
    InvalidScene,
}

/// The one description of every transfer message.
pub fn serialize_transfer<S: Stream>(
    s: &mut S,
    message: &mut TransferMessage,
) -> Result<(), CodecError> {
    let mut id = SCENE_TRANSFER_ID;
    s.u16(ID, &mut id)?;
    if id != SCENE_TRANSFER_ID {
        return Err(CodecError::Invalid { field: ID.name });
    }
    let mut kind = match message {
        TransferMessage::Request { .. } => 0,
        TransferMessage::Chunk { .. } => 1,
    };
    s.int(KIND, &mut kind, 0, 1)?;
    if S::READING {
        *message = if kind == 0 {
            TransferMessage::Request { chunks: Vec::new() }
        } else {
            TransferMessage::Chunk {
                index: 0,
                bytes: Vec::new(),
            }
        };
    }
    match message {
        TransferMessage::Request { chunks } => {
            let mut n = chunks.len() as u32;
            s.count(COUNT, &mut n, MAX_REQUESTED_CHUNKS as u32)?;
            if S::READING {
                *chunks = vec![0; n as usize];
            }
            for c in chunks.iter_mut() {
                s.u16(INDEX, c)?;
            }
        }
        TransferMessage::Chunk { index, bytes } => {
            s.u16(INDEX, index)?;
            let mut n = bytes.len() as u32;
            s.count(LEN, &mut n, SCENE_CHUNK_BYTES as u32)?;
            if S::READING {
                *bytes = vec![0; n as usize];
            }
            for b in bytes.iter_mut() {
                s.u8(BYTE, b)?;
            }
        }
    }
    Ok(())
}

/// True when a datagram starts like a transfer message (the receiver then decodes it as one).
pub fn is_transfer(bytes: &[u8]) -> bool {
    bytes.len() >= 2 && u16::from_be_bytes([bytes[0], bytes[1]]) == SCENE_TRANSFER_ID
}

/// Writes a transfer message as one datagram payload.
pub fn encode_transfer(message: &TransferMessage) -> Result<Vec<u8>, CodecError> {
    let mut s = BitWriteStream::with_capacity(MAX_DATAGRAM_PAYLOAD);
    let mut m = message.clone();
    serialize_transfer(&mut s, &mut m)?;
    Ok(s.finish())
}

/// Reads a transfer datagram; longer than a datagram, truncated or with trailing bytes is an error.
pub fn decode_transfer(bytes: &[u8]) -> Result<TransferMessage, CodecError> {
    if bytes.len() > MAX_DATAGRAM_PAYLOAD {
        return Err(CodecError::Invalid {
            field: "scene transfer length",
        });
    }
    let mut s = BitReadStream::new(bytes);
    let mut message = TransferMessage::Request { chunks: Vec::new() };
    serialize_transfer(&mut s, &mut message)?;
    if s.bits_left() >= 8 {
        return Err(CodecError::Invalid {
            field: "scene transfer trailing bytes",
        });
    }
    Ok(message)
}

/// The host's side: the scene's bytes and offer, answering requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SceneUpload {
    bytes: Vec<u8>,
    offer: SceneOffer,
}

impl SceneUpload {
    /// The upload of `scene` (its compact RON, deflated); a scene over [`MAX_SCENE_BYTES`] of text is refused.
    pub fn new(scene: &SceneSpec) -> Result<Self, SceneTransferError> {
        let text = scene.to_ron_compact().into_bytes();
        if text.len() > MAX_SCENE_BYTES {
            return Err(SceneTransferError::TooLarge {
                len: text.len().min(u32::MAX as usize) as u32,
                max: MAX_SCENE_BYTES,
            });
        }
        let bytes = miniz_oxide::deflate::compress_to_vec(&text, DEFLATE_LEVEL);
        let offer = SceneOffer {
            len: bytes.len() as u32,
            hash: scene_hash(&bytes),
        };
        Ok(Self { bytes, offer })
    }

    /// What the accept carries.
    pub fn offer(&self) -> SceneOffer {
        self.offer
    }

    /// The scene's bytes as they travel (deflated).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The chunk datagrams answering a request; indices past the scene are skipped.
    pub fn answer(&self, chunks: &[u16]) -> Vec<Vec<u8>> {
        chunks
            .iter()
            .take(MAX_REQUESTED_CHUNKS)
            .filter_map(|&index| {
                let start = usize::from(index) * SCENE_CHUNK_BYTES;
                let part = self.bytes.get(start..)?;
                if part.is_empty() {
                    return None;
                }
                let bytes = part[..part.len().min(SCENE_CHUNK_BYTES)].to_vec();
                encode_transfer(&TransferMessage::Chunk { index, bytes }).ok()
            })
            .collect()
    }
}

/// The guest's side: the chunks received so far of the scene an accept offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SceneDownload {
    offer: SceneOffer,
    chunks: Vec<Option<Vec<u8>>>,
    held: usize,
}

impl SceneDownload {
    /// A download of what `offer` describes; an offer over [`MAX_SCENE_BYTES`] is refused before anything is
    /// allocated.
    pub fn new(offer: SceneOffer) -> Result<Self, SceneTransferError> {
        if offer.len as usize > MAX_SCENE_BYTES {
            return Err(SceneTransferError::TooLarge {
                len: offer.len,
                max: MAX_SCENE_BYTES,
            });
        }
        Ok(Self {
            offer,
            chunks: vec![None; offer.chunk_count()],
            held: 0,
        })
    }

    /// The offer being downloaded.
    pub fn offer(&self) -> SceneOffer {
        self.offer
    }

    /// Chunks held and chunks in all.
    pub fn progress(&self) -> (usize, usize) {
        (self.held, self.chunks.len())
    }

    /// Up to `max` chunk indices still missing, lowest first.
    pub fn missing(&self, max: usize) -> Vec<u16> {
        self.chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_none())
            .take(max)
            .map(|(i, _)| i as u16)
            .collect()
    }

    /// Stores a chunk (again is harmless). An index past the offer or a length that does not fit its place is
    /// an error.
    pub fn insert(&mut self, index: u16, bytes: Vec<u8>) -> Result<(), SceneTransferError> {
        let count = self.chunks.len();
        let i = usize::from(index);
        if i >= count {
            return Err(SceneTransferError::ChunkIndex { index, count });
        }
        let expected = if i + 1 == count {
            self.offer.len as usize - i * SCENE_CHUNK_BYTES
        } else {
            SCENE_CHUNK_BYTES
        };
        if bytes.len() != expected {
            return Err(SceneTransferError::ChunkLength {
                index,
                len: bytes.len(),
                expected,
            });
        }
        if self.chunks[i].is_none() {
            self.held += 1;
        }
        self.chunks[i] = Some(bytes);
        Ok(())
    }

    /// Once every chunk is held: the scene, if the bytes hash to the offer's hash and parse as a valid scene.
    pub fn finish(&self) -> Option<Result<SceneSpec, SceneTransferError>> {
        if self.held < self.chunks.len() {
            return None;
        }
        let bytes: Vec<u8> = self.chunks.iter().flatten().flatten().copied().collect();
        let found = scene_hash(&bytes);
        if found != self.offer.hash {
            return Some(Err(SceneTransferError::HashMismatch {
                expected: self.offer.hash,
                found,
            }));
        }
        let Ok(text) = miniz_oxide::inflate::decompress_to_vec_with_limit(&bytes, MAX_SCENE_BYTES)
        else {
            return Some(Err(SceneTransferError::Inflate {
                max: MAX_SCENE_BYTES,
            }));
        };
        let scene = std::str::from_utf8(&text)
            .map_err(|_| SceneTransferError::InvalidScene)
            .and_then(|text| {
                SceneSpec::from_ron(text).map_err(|e: SceneError| {
                    tracing::warn!(%e, "scene from the host refused");
                    SceneTransferError::InvalidScene
                })
            });
        Some(scene)
    }
}

#[cfg(test)]
mod tests;
