//! Writes how encoding_rs encodes every non-ASCII code point, one
//! `<name>.dump` file per encoding, for
//! `crates/scrapy-url/gen/gen_codec_tables.py` (which compares them with
//! the Python codecs Scrapy uses and generates `crates/scrapy-url/src/codec_tables.rs`).
//!
//!     cargo run --example encoding_rs_dump -- OUTPUT_DIR

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: cargo run --example encoding_rs_dump -- OUTPUT_DIR");
        std::process::exit(2);
    };
    use encoding_rs::*;
    let encodings = [
        IBM866,
        ISO_8859_2,
        ISO_8859_3,
        ISO_8859_4,
        ISO_8859_5,
        ISO_8859_6,
        ISO_8859_7,
        ISO_8859_8,
        ISO_8859_10,
        ISO_8859_13,
        ISO_8859_14,
        ISO_8859_15,
        ISO_8859_16,
        KOI8_R,
        KOI8_U,
        MACINTOSH,
        WINDOWS_874,
        WINDOWS_1250,
        WINDOWS_1251,
        WINDOWS_1252,
        WINDOWS_1253,
        WINDOWS_1254,
        WINDOWS_1255,
        WINDOWS_1256,
        WINDOWS_1257,
        WINDOWS_1258,
        GB18030,
        BIG5,
        EUC_JP,
        ISO_2022_JP,
        SHIFT_JIS,
        EUC_KR,
    ];
    for encoding in encodings {
        let mut out = String::new();
        let mut buf = [0; 4];
        for c in (0x80..=0x10ffff).filter_map(char::from_u32) {
            let (bytes, _, unmappable) = encoding.encode(c.encode_utf8(&mut buf));
            let value = if unmappable {
                "E".to_owned()
            } else {
                hex::encode(bytes)
            };
            out.push_str(&format!("{:x} {value}\n", u32::from(c)));
        }
        let path = format!("{dir}/{}.dump", encoding.name());
        std::fs::write(&path, out).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
}
