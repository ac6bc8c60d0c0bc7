//! The OTLP export read back field by field with the wire reader: the field numbers
//! of `profiles.proto` (OTLP 1.10.0) pinned here, the values equal to the model's.
//! tests/it/otlp.rs decodes real recordings with the official Python protos.

use super::*;
use crate::output::otlp::{OtlpOptions, encode};
use crate::output::protobuf::{Field, fields, packed};

/// The fields of a message numbered `n`, in order.
fn all<'a>(msg: &'a [u8], n: u32) -> Vec<Field<'a>> {
    fields(msg)
        .unwrap()
        .into_iter()
        .filter(|f| f.number() == n)
        .collect()
}

fn bytes(msg: &[u8], n: u32) -> Vec<&[u8]> {
    all(msg, n)
        .into_iter()
        .map(|f| match f {
            Field::Bytes(_, b) => b,
            f => panic!("field {n} is {f:?}"),
        })
        .collect()
}

fn int(msg: &[u8], n: u32) -> u64 {
    match all(msg, n).last() {
        Some(Field::Varint(_, v) | Field::Fixed64(_, v)) => *v,
        None => 0,
        f => panic!("field {n} is {f:?}"),
    }
}

fn ints(msg: &[u8], n: u32) -> Vec<u64> {
    bytes(msg, n)
        .into_iter()
        .flat_map(|b| packed(b).unwrap())
        .collect()
}

fn fixed64s(msg: &[u8], n: u32) -> Vec<u64> {
    bytes(msg, n)
        .into_iter()
        .flat_map(|b| {
            b.chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        })
        .collect()
}

fn string(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

/// The decoded dictionary: strings, and attributes as (key, value as text).
struct Dict<'a> {
    strings: Vec<String>,
    attributes: Vec<(String, String)>,
    functions: Vec<&'a [u8]>,
    locations: Vec<&'a [u8]>,
    stacks: Vec<Vec<u64>>,
}

fn any_value(v: &[u8]) -> String {
    match fields(v).unwrap().first() {
        Some(Field::Bytes(1, s)) => string(s),
        Some(Field::Varint(3, n)) => n.to_string(),
        f => panic!("AnyValue {f:?}"),
    }
}

fn dict(data: &[u8]) -> Dict<'_> {
    let d = bytes(data, 2)[0];
    let strings: Vec<String> = bytes(d, 5).into_iter().map(string).collect();
    let attributes = bytes(d, 6)
        .into_iter()
        .map(|a| {
            let value = bytes(a, 2)
                .first()
                .map(|v| any_value(v))
                .unwrap_or_default();
            (strings[int(a, 1) as usize].clone(), value)
        })
        .collect();
    Dict {
        attributes,
        functions: bytes(d, 3),
        locations: bytes(d, 2),
        stacks: bytes(d, 7).into_iter().map(|s| ints(s, 1)).collect(),
        strings,
    }
}

impl Dict<'_> {
    /// A stack's function names, leaf first (each location's lines innermost first).
    fn names(&self, stack: u64) -> Vec<String> {
        self.stacks[stack as usize]
            .iter()
            .flat_map(|&l| bytes(self.locations[l as usize], 3))
            .map(|line| {
                let f = self.functions[int(line, 1) as usize];
                self.strings[int(f, 1) as usize].clone()
            })
            .collect()
    }

    fn attrs(&self, ids: &[u64]) -> Vec<(String, String)> {
        ids.iter()
            .map(|&i| self.attributes[i as usize].clone())
            .collect()
    }
}

#[test]
fn otlp_fields_decode_to_the_models_numbers() {
    let p = model(true);
    let data = encode(&p, &OtlpOptions::default());
    let d = dict(&data);
    // Every table starts with its zero entry.
    assert_eq!(d.strings[0], "");
    assert_eq!(d.attributes[0], (String::new(), String::new()));
    assert!(d.functions[0].is_empty() && d.locations[0].is_empty());
    assert!(d.stacks[0].is_empty());
    // One process: one resource, with its pid and service.
    let rps = bytes(&data, 1);
    assert_eq!(rps.len(), 1);
    let resource = bytes(rps[0], 1)[0];
    let attrs: Vec<(String, String)> = bytes(resource, 1)
        .into_iter()
        .map(|kv| (string(bytes(kv, 1)[0]), any_value(bytes(kv, 2)[0])))
        .collect();
    assert!(
        attrs.contains(&("process.pid".into(), "10".into())),
        "{attrs:?}"
    );
    assert!(
        attrs.contains(&("service.name".into(), "main".into())),
        "{attrs:?}"
    );
    let scope = bytes(rps[0], 2)[0];
    assert_eq!(string(bytes(bytes(scope, 1)[0], 1)[0]), "profile");
    let profiles = bytes(scope, 2);
    let types: Vec<(String, String)> = profiles
        .iter()
        .map(|p| {
            let vt = bytes(p, 1)[0];
            (
                d.strings[int(vt, 1) as usize].clone(),
                d.strings[int(vt, 2) as usize].clone(),
            )
        })
        .collect();
    let want = [
        ("cpu", "nanoseconds"),
        ("samples", "count"),
        ("off_cpu", "nanoseconds"),
    ];
    assert_eq!(
        types,
        want.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec()
    );
    for prof in &profiles {
        assert_eq!(
            int(prof, 3),
            p.meta.start_unix_ns,
            "time_unix_nano, fixed64"
        );
        assert_eq!(int(prof, 4), 1000 * MS, "duration_nano");
    }
    assert_eq!(int(profiles[0], 6), 10 * MS, "period");
    // cpu: every sample's weight with its timestamp; 500 ms in all, 400 ms main's.
    let mut by_thread: std::collections::BTreeMap<String, u64> = Default::default();
    let mut total = 0;
    for s in bytes(profiles[0], 2) {
        let values = ints(s, 4);
        let times = fixed64s(s, 5);
        assert_eq!(values.len(), times.len());
        assert!(times.iter().all(|&t| t >= p.meta.start_unix_ns));
        let sum: u64 = values.iter().sum();
        total += sum;
        let a = d.attrs(&ints(s, 2));
        let name = a
            .iter()
            .find(|(k, _)| k == "thread.name")
            .unwrap()
            .1
            .clone();
        assert!(a.iter().any(|(k, _)| k == "thread.id"), "{a:?}");
        *by_thread.entry(name).or_default() += sum;
        assert_eq!(d.names(int(s, 1)), ["compute", "main"]);
    }
    assert_eq!(total, 500 * MS);
    assert_eq!(by_thread["main"], 400 * MS);
    assert_eq!(by_thread["worker"], 100 * MS);
    // samples: 50 in all, no timestamps.
    let counts: u64 = bytes(profiles[1], 2)
        .into_iter()
        .map(|s| {
            assert!(fixed64s(s, 5).is_empty());
            ints(s, 4).iter().sum::<u64>()
        })
        .sum();
    assert_eq!(counts, 50);
    // off_cpu: the state as an attribute, the [off-cpu] frame left out.
    let mut states: std::collections::BTreeMap<String, u64> = Default::default();
    for s in bytes(profiles[2], 2) {
        let a = d.attrs(&ints(s, 2));
        let state = a
            .iter()
            .find(|(k, _)| k == "thread.state")
            .unwrap()
            .1
            .clone();
        let names = d.names(int(s, 1));
        assert!(
            !names.iter().any(|n| n.starts_with("[off-cpu")),
            "{names:?}"
        );
        *states.entry(state).or_default() += ints(s, 4).iter().sum::<u64>();
    }
    assert_eq!(states["lock"], 600 * MS);
    assert_eq!(states["sleep"], 800 * MS);
    // Kernel frames are marked as such.
    let kinds: Vec<&(String, String)> = d
        .attributes
        .iter()
        .filter(|(k, _)| k == "profile.frame.type")
        .collect();
    assert!(kinds.iter().any(|(_, v)| v == "kernel"), "{kinds:?}");
    assert!(kinds.iter().any(|(_, v)| v == "native"), "{kinds:?}");
}

#[test]
fn a_cpu_only_otlp_profile_has_no_off_cpu_type_and_takes_the_given_service() {
    let p = model(false);
    let o = OtlpOptions {
        service: Some("checkout".into()),
        attributes: vec![("env".into(), "prod".into())],
        ..Default::default()
    };
    let data = encode(&p, &o);
    let d = dict(&data);
    assert!(!d.strings.iter().any(|s| s == "off_cpu"));
    let text = String::from_utf8_lossy(&data);
    assert!(text.contains("checkout") && text.contains("prod"));
}
