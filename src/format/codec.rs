//! Primitive encodings of the recording file: LEB128 varints, zigzag for signed
//! deltas, length-prefixed byte strings. The decoder never panics: every read is
//! bounds-checked and reports where the payload ended early.

/// Appends `v` as an unsigned LEB128 varint.
pub(crate) fn put_u64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends a signed value zigzag-encoded (small magnitudes stay small).
pub(crate) fn put_i64(buf: &mut Vec<u8>, v: i64) {
    put_u64(buf, ((v << 1) ^ (v >> 63)) as u64);
}

pub(crate) fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    put_u64(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

pub(crate) fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_bytes(buf, s.as_bytes());
}

/// The payload ended inside a value, or a value was out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

/// A cursor over one chunk's payload.
pub(crate) struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Decoder { data, pos: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        let b = *self.data.get(self.pos).ok_or(Malformed)?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Malformed> {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(Malformed);
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(Malformed);
            }
        }
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Malformed> {
        u32::try_from(self.u64()?).map_err(|_| Malformed)
    }

    pub(crate) fn i64(&mut self) -> Result<i64, Malformed> {
        let v = self.u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let len = usize::try_from(self.u64()?).map_err(|_| Malformed)?;
        let end = self.pos.checked_add(len).ok_or(Malformed)?;
        let s = self.data.get(self.pos..end).ok_or(Malformed)?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn string(&mut self) -> Result<String, Malformed> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        let values = [0, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX];
        let mut buf = Vec::new();
        for v in values {
            put_u64(&mut buf, v);
        }
        let signed = [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX];
        for v in signed {
            put_i64(&mut buf, v);
        }
        let mut d = Decoder::new(&buf);
        for v in values {
            assert_eq!(d.u64().unwrap(), v);
        }
        for v in signed {
            assert_eq!(d.i64().unwrap(), v);
        }
        assert!(d.is_empty());
        assert_eq!(d.u64(), Err(Malformed));
    }

    #[test]
    fn small_values_are_small() {
        let mut buf = Vec::new();
        put_u64(&mut buf, 100);
        put_i64(&mut buf, -3);
        assert_eq!(buf.len(), 2);
    }

    #[test]
    fn cut_and_overlong_input_is_malformed() {
        let mut d = Decoder::new(&[0x80, 0x80]);
        assert_eq!(d.u64(), Err(Malformed));
        let mut d = Decoder::new(&[0xff; 11]);
        assert_eq!(d.u64(), Err(Malformed));
        let mut buf = Vec::new();
        put_u64(&mut buf, 10);
        buf.extend_from_slice(b"abc");
        let mut d = Decoder::new(&buf);
        assert_eq!(d.bytes(), Err(Malformed));
    }
}
