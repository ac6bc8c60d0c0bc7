//! The protobuf wire format, written by hand for the pprof and OTLP exports: a
//! message writer (varints, fixed64 and length-delimited fields), the string table
//! both formats index into, and a bounds-checked reader of one message's fields, which
//! the OTLP push uses on the server's reply and the tests use to pin field numbers.

use std::collections::HashMap;

use crate::format::codec;

/// A protobuf message being written.
#[derive(Default)]
pub(crate) struct Pb(pub(crate) Vec<u8>);

impl Pb {
    /// A varint: protobuf's base-128 encoding is the recording file's LEB128.
    fn varint(&mut self, v: u64) {
        codec::put_u64(&mut self.0, v);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    /// A varint field (int32/int64/uint64/bool); zero is the default and left out.
    pub(crate) fn int(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }

    /// A varint field written even when zero (a member of a oneof).
    pub(crate) fn int_always(&mut self, field: u32, v: u64) {
        self.key(field, 0);
        self.varint(v);
    }

    /// A fixed64 field; zero is the default and left out.
    pub(crate) fn fixed64(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 1);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A length-delimited field (bytes, string), written even when empty.
    pub(crate) fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// An embedded message, written even when empty (a table's zero entry).
    pub(crate) fn message(&mut self, field: u32, m: &Pb) {
        self.bytes(field, &m.0);
    }

    /// A packed repeated varint field; left out when empty.
    pub(crate) fn packed(&mut self, field: u32, vs: &[u64]) {
        if vs.is_empty() {
            return;
        }
        let mut inner = Pb::default();
        for &v in vs {
            inner.varint(v);
        }
        self.bytes(field, &inner.0);
    }

    /// A packed repeated fixed64 field; left out when empty.
    pub(crate) fn packed_fixed64(&mut self, field: u32, vs: &[u64]) {
        if vs.is_empty() {
            return;
        }
        let mut inner = Vec::with_capacity(vs.len() * 8);
        for &v in vs {
            inner.extend_from_slice(&v.to_le_bytes());
        }
        self.bytes(field, &inner);
    }
}

/// A string table: index 0 is the empty string.
pub(crate) struct Strings {
    pub(crate) list: Vec<String>,
    ids: HashMap<String, u64>,
}

impl Default for Strings {
    fn default() -> Self {
        Strings {
            list: vec![String::new()],
            ids: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Strings {
    /// The index of `s`, added at the end when new.
    pub(crate) fn id(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.list.len() as u64;
        self.list.push(s.to_owned());
        self.ids.insert(s.to_owned(), id);
        id
    }
}

/// One field as read: its number and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field<'a> {
    /// A varint (wire type 0).
    Varint(u32, u64),
    /// A fixed64 (wire type 1).
    Fixed64(u32, u64),
    /// Length-delimited bytes (wire type 2): a string, bytes, a message or a packed
    /// repeated field.
    Bytes(u32, &'a [u8]),
    /// A fixed32 (wire type 5).
    Fixed32(u32, u32),
}

impl Field<'_> {
    /// The field number.
    #[cfg(test)]
    pub(crate) fn number(&self) -> u32 {
        match *self {
            Field::Varint(n, _)
            | Field::Fixed64(n, _)
            | Field::Bytes(n, _)
            | Field::Fixed32(n, _) => n,
        }
    }
}

/// The message ended inside a field, or a field has a wire type this reader does not
/// know (groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a protobuf message: {0}")]
pub(crate) struct BadMessage(&'static str);

/// The fields of one message, in order, or why it is not one. Bounded by the input:
/// no allocation beyond the list of fields.
pub(crate) fn fields(data: &[u8]) -> Result<Vec<Field<'_>>, BadMessage> {
    let mut d = codec::Decoder::new(data);
    let mut out = Vec::new();
    let cut = BadMessage("it ends inside a field");
    while !d.is_empty() {
        let key = d.u64().map_err(|_| cut)?;
        let number =
            u32::try_from(key >> 3).map_err(|_| BadMessage("a field number is too large"))?;
        if number == 0 {
            return Err(BadMessage("a field is numbered 0"));
        }
        out.push(match key & 7 {
            0 => Field::Varint(number, d.u64().map_err(|_| cut)?),
            1 => {
                let mut b = [0u8; 8];
                for x in &mut b {
                    *x = d.u8().map_err(|_| cut)?;
                }
                Field::Fixed64(number, u64::from_le_bytes(b))
            }
            2 => Field::Bytes(number, d.bytes().map_err(|_| cut)?),
            5 => {
                let mut b = [0u8; 4];
                for x in &mut b {
                    *x = d.u8().map_err(|_| cut)?;
                }
                Field::Fixed32(number, u32::from_le_bytes(b))
            }
            _ => return Err(BadMessage("a field has wire type 3, 4, 6 or 7")),
        });
    }
    Ok(out)
}

/// The varints of a packed repeated field.
#[cfg(test)]
pub(crate) fn packed(data: &[u8]) -> Result<Vec<u64>, BadMessage> {
    let mut d = codec::Decoder::new(data);
    let mut out = Vec::new();
    while !d.is_empty() {
        out.push(
            d.u64()
                .map_err(|_| BadMessage("a packed field ends inside a varint"))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_encode_as_protobuf_does() {
        let mut p = Pb::default();
        p.int(1, 150);
        assert_eq!(p.0, [0x08, 0x96, 0x01]);
        let mut p = Pb::default();
        p.bytes(2, b"testing");
        assert_eq!(p.0, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
        let mut p = Pb::default();
        p.packed(4, &[3, 270, 86942]);
        assert_eq!(p.0, [0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05]);
        let mut p = Pb::default();
        p.int(3, 0);
        p.packed(4, &[]);
        assert!(p.0.is_empty());
        let mut p = Pb::default();
        p.fixed64(3, 1);
        assert_eq!(p.0, [0x19, 1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn what_is_written_reads_back_and_cut_input_is_refused() {
        let mut inner = Pb::default();
        inner.int(1, 7);
        let mut p = Pb::default();
        p.int(1, 300);
        p.fixed64(2, u64::MAX);
        p.message(3, &inner);
        p.packed(4, &[1, 2, 300]);
        let f = fields(&p.0).unwrap();
        assert_eq!(f[0], Field::Varint(1, 300));
        assert_eq!(f[1], Field::Fixed64(2, u64::MAX));
        assert_eq!(f[2], Field::Bytes(3, &[0x08, 7][..]));
        let Field::Bytes(4, b) = f[3] else {
            panic!("{f:?}")
        };
        assert_eq!(packed(b).unwrap(), [1, 2, 300]);
        for n in 0..p.0.len() {
            // Every cut either ends between fields or is refused; never a panic.
            let _ = fields(&p.0[..n]);
        }
        assert!(fields(&p.0[..p.0.len() - 1]).is_err());
        assert!(fields(&[0x0b]).is_err(), "a group");
        assert!(fields(&[0x00, 0x01]).is_err(), "field 0");
    }
}
