use super::*;
use crate::world::scene::SceneKind;

fn download_all(upload: &SceneUpload) -> SceneDownload {
    let mut d = SceneDownload::new(upload.offer()).unwrap();
    while d.finish().is_none() {
        for datagram in upload.answer(&d.missing(MAX_REQUESTED_CHUNKS)) {
            assert!(datagram.len() <= MAX_DATAGRAM_PAYLOAD);
            let TransferMessage::Chunk { index, bytes } = decode_transfer(&datagram).unwrap()
            else {
                panic!("not a chunk");
            };
            d.insert(index, bytes).unwrap();
        }
    }
    d
}

#[test]
fn every_demo_scene_arrives_whole_in_chunks_under_the_mtu() {
    for scene in SceneKind::ALL
        .map(SceneKind::spec)
        .into_iter()
        .chain([SceneSpec::playground()])
    {
        let upload = SceneUpload::new(&scene).unwrap();
        let d = download_all(&upload);
        assert_eq!(d.finish().unwrap().unwrap(), scene);
    }
}

#[test]
fn a_truncated_chunk_is_refused_with_its_length() {
    let upload = SceneUpload::new(&SceneSpec::katamari()).unwrap();
    let mut d = SceneDownload::new(upload.offer()).unwrap();
    let TransferMessage::Chunk { index, mut bytes } =
        decode_transfer(&upload.answer(&[0])[0]).unwrap()
    else {
        panic!("not a chunk");
    };
    bytes.truncate(100);
    let err = d.insert(index, bytes).unwrap_err();
    assert_eq!(
        err,
        SceneTransferError::ChunkLength {
            index: 0,
            len: 100,
            expected: SCENE_CHUNK_BYTES
        }
    );
    assert_eq!(
        err.to_string(),
        "scene chunk 0 holds 100 bytes where the offer needs 1100"
    );
    let count = upload.offer().chunk_count();
    assert!(matches!(
        d.insert(count as u16, vec![0; 10]),
        Err(SceneTransferError::ChunkIndex { .. })
    ));
    // A datagram cut short does not even decode.
    let datagram = &upload.answer(&[1])[0];
    assert!(decode_transfer(&datagram[..datagram.len() - 10]).is_err());
}

#[test]
fn a_wrong_hash_is_refused_and_so_is_corrupt_content() {
    let upload = SceneUpload::new(&SceneSpec::playground()).unwrap();
    let wrong = SceneOffer {
        hash: upload.offer().hash ^ 1,
        ..upload.offer()
    };
    let mut d = SceneDownload::new(wrong).unwrap();
    let all: Vec<u16> = (0..wrong.chunk_count() as u16).collect();
    for datagram in upload.answer(&all) {
        let TransferMessage::Chunk { index, bytes } = decode_transfer(&datagram).unwrap() else {
            panic!("not a chunk");
        };
        d.insert(index, bytes).unwrap();
    }
    let err = d.finish().unwrap().unwrap_err();
    assert!(matches!(err, SceneTransferError::HashMismatch { .. }));
    assert!(err.to_string().contains("does not match the host's"));

    // Bytes that hash right but do not inflate, and deflated text that is not a scene.
    let text = b"(objects: [(shape: Ball(radius: -1.0), pose: (position: (0, 0, 0)))])";
    let deflated = miniz_oxide::deflate::compress_to_vec(text, 6);
    for (bytes, refusal) in [
        (
            text.to_vec(),
            SceneTransferError::Inflate {
                max: MAX_SCENE_BYTES,
            },
        ),
        (deflated, SceneTransferError::InvalidScene),
    ] {
        assert_eq!(finished(bytes), Err(refusal));
    }
}

/// A download of `bytes` offered with their own length and hash, finished.
fn finished(bytes: Vec<u8>) -> Result<SceneSpec, SceneTransferError> {
    let offer = SceneOffer {
        len: bytes.len() as u32,
        hash: scene_hash(&bytes),
    };
    let mut d = SceneDownload::new(offer).unwrap();
    for (i, chunk) in bytes.chunks(SCENE_CHUNK_BYTES).enumerate() {
        d.insert(i as u16, chunk.to_vec()).unwrap();
    }
    d.finish().unwrap()
}

#[test]
fn a_decompression_bomb_stops_at_the_limit() {
    let bomb = miniz_oxide::deflate::compress_to_vec(&vec![b' '; 2 * MAX_SCENE_BYTES], 10);
    assert!(bomb.len() < MAX_SCENE_BYTES / 100, "{}", bomb.len());
    let err = finished(bomb).unwrap_err();
    assert_eq!(
        err,
        SceneTransferError::Inflate {
            max: MAX_SCENE_BYTES
        }
    );
    assert!(err.to_string().contains("not deflated data of at most"));
}

/// Deflated, the katamari (901 objects, 68 KB of compact RON: 62 chunks) travels in 3 chunks.
#[test]
fn the_katamari_travels_in_a_handful_of_chunks() {
    let scene = SceneSpec::katamari();
    let text = scene.to_ron_compact().len();
    let offer = SceneUpload::new(&scene).unwrap().offer();
    assert!(text.div_ceil(SCENE_CHUNK_BYTES) > 50, "{text} bytes of RON");
    assert!(offer.chunk_count() <= 4, "{} chunks", offer.chunk_count());
}

#[test]
fn an_oversized_offer_is_refused_before_allocating() {
    let err = SceneDownload::new(SceneOffer {
        len: MAX_SCENE_BYTES as u32 + 1,
        hash: 0,
    })
    .unwrap_err();
    assert!(matches!(err, SceneTransferError::TooLarge { .. }));
}

#[test]
fn transfer_messages_round_trip_and_garbage_is_an_error() {
    let messages = [
        TransferMessage::Request {
            chunks: vec![0, 7, 65535],
        },
        TransferMessage::Chunk {
            index: 3,
            bytes: vec![1; SCENE_CHUNK_BYTES],
        },
    ];
    for m in messages {
        let bytes = encode_transfer(&m).unwrap();
        assert!(is_transfer(&bytes));
        assert_eq!(decode_transfer(&bytes).unwrap(), m);
        for cut in 0..bytes.len() {
            assert!(decode_transfer(&bytes[..cut]).is_err());
        }
    }
    assert!(
        encode_transfer(&TransferMessage::Request {
            chunks: vec![0; MAX_REQUESTED_CHUNKS + 1]
        })
        .is_err()
    );
    assert!(decode_transfer(&[0x53, 0x43, 0xFF, 0xFF, 0xFF]).is_err());
    assert!(!is_transfer(&[0x50, 0x53, 0, 0]));
}
