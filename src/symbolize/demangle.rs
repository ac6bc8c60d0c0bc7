//! Turning linker names into the names people read: Rust legacy (`_ZN…17h<hash>E`) and
//! v0 (`_R…`) symbols without their hash, C++ Itanium symbols through cpp_demangle, and
//! everything else unchanged. Also the one Rust-specific repair DWARF allows: legacy
//! symbols carry no generic arguments, but the DIE's `DW_AT_name` does (`work<u64>`),
//! so [`with_rust_generics`] puts them back (`fixture::work::<u64>`).

/// The readable form of a symbol name; the name itself when it is not mangled or cannot
/// be demangled.
pub fn demangle(name: &str) -> String {
    // A PLT stub's name (`_ZN...E@plt`): the function's, demangled, then `@plt`.
    if let Some(base) = name.strip_suffix("@plt") {
        return format!("{}@plt", demangle(base));
    }
    if let Some(rust) = demangle_rust(name) {
        return rust;
    }
    if name.starts_with("_Z")
        && let Some(cpp) = demangle_cpp(name)
    {
        return cpp;
    }
    name.to_owned()
}

/// Rust names: v0 (`_R`) always; legacy (`_ZN`) only when the last path element is a
/// rustc hash, so C++ names that happen to parse as a path stay with cpp_demangle.
fn demangle_rust(name: &str) -> Option<String> {
    let v0 = name.starts_with("_R") || name.starts_with("__R");
    if !v0 && !is_rust_legacy(name) {
        return None;
    }
    let demangled = rustc_demangle::try_demangle(name).ok()?;
    // `{:#}` leaves out the hash of legacy names and the crate disambiguators of v0.
    Some(format!("{demangled:#}"))
}

/// `_ZN` … `17h` + 16 hex digits + `E`, optionally followed by a `.llvm.N`-style suffix.
fn is_rust_legacy(name: &str) -> bool {
    let body = name
        .strip_prefix("_ZN")
        .or_else(|| name.strip_prefix("__ZN"));
    let Some(body) = body else { return false };
    // Drop a `.llvm.N`-style suffix: it starts after the last `E` (the hash is
    // lowercase, and `..` inside escaped path elements comes before it).
    let Some(end) = body.rfind('E') else {
        return false;
    };
    if !(body[end + 1..].is_empty() || body[end + 1..].starts_with('.')) {
        return false;
    }
    let body = &body[..end];
    body.len() >= 19
        && body.is_char_boundary(body.len() - 19)
        && body[body.len() - 19..].starts_with("17h")
        && body[body.len() - 16..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

fn demangle_cpp(name: &str) -> Option<String> {
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    symbol
        .demangle_with_options(&cpp_demangle::DemangleOptions::default())
        .ok()
}

/// Whether `raw` is a legacy Rust symbol, whose demangled form lacks generic arguments.
pub(super) fn is_legacy_rust_symbol(raw: &str) -> bool {
    is_rust_legacy(raw)
}

/// Appends the generic arguments of a DWARF `DW_AT_name` such as `work<u64>` to a
/// demangled legacy path `fixture::work`, giving `fixture::work::<u64>`. Returns the
/// path unchanged when the DWARF name has no arguments or names something else.
pub(super) fn with_rust_generics(demangled: String, dwarf_name: &str) -> String {
    let Some(open) = dwarf_name.find('<') else {
        return demangled;
    };
    let (base, args) = dwarf_name.split_at(open);
    let last = demangled.rsplit("::").next().unwrap_or(&demangled);
    let same = last == base || (base.starts_with("{closure") && last == "{{closure}}");
    if same && args.ends_with('>') {
        format!("{demangled}::{args}")
    } else {
        demangled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy_loses_its_hash() {
        assert_eq!(
            demangle("_ZN7fixture4work17he5b6453077240790E"),
            "fixture::work"
        );
        assert_eq!(
            demangle("_ZN7fixture4main28_$u7b$$u7b$closure$u7d$$u7d$17h0123456789abcdefE"),
            "fixture::main::{{closure}}"
        );
        assert_eq!(
            demangle("_ZN3std2rt10lang_start17h1234567890abcdefE.llvm.42"),
            "std::rt::lang_start"
        );
        // Escaped path elements contain `..`: not to be taken for a suffix.
        assert_eq!(
            demangle(
                "_ZN4core3cmp5impls56_$LT$impl$u20$core..cmp..PartialEq$u20$for$u20$usize$GT$2eq17h17de364e172f9fd6E"
            ),
            "core::cmp::impls::<impl core::cmp::PartialEq for usize>::eq"
        );
    }

    #[test]
    fn rust_v0() {
        // fixture::work::<u64>, mangled with -C symbol-mangling-version=v0
        assert_eq!(
            demangle("_RINvCs1234_7fixture4workyEB2_"),
            "fixture::work::<u64>"
        );
    }

    #[test]
    fn cpp_itanium() {
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
    }

    /// PLT stub names (`NAME@plt`, made up by the symbolizer): the function's name
    /// demangled, then `@plt`.
    #[test]
    fn plt_stub_names() {
        assert_eq!(demangle("memcpy@plt"), "memcpy@plt");
        assert_eq!(demangle("_ZN3foo3barEv@plt"), "foo::bar()@plt");
        assert_eq!(
            demangle("_ZN7fixture4work17he5b6453077240790E@plt"),
            "fixture::work@plt"
        );
    }

    #[test]
    fn unmangled_and_broken_names_stay() {
        assert_eq!(demangle("msort_with_tmp"), "msort_with_tmp");
        assert_eq!(demangle("_Z"), "_Z");
        assert_eq!(demangle("_ZN3foo"), "_ZN3foo");
        assert_eq!(demangle(""), "");
        assert_eq!(
            demangle("_ZNé17h0123456789abcdefE"),
            "_ZNé17h0123456789abcdefE"
        );
    }

    #[test]
    fn generics_come_back_from_dwarf() {
        assert_eq!(
            with_rust_generics("fixture::work".into(), "work<u64>"),
            "fixture::work::<u64>"
        );
        assert_eq!(
            with_rust_generics("fixture::work".into(), "work"),
            "fixture::work"
        );
        assert_eq!(
            with_rust_generics("fixture::other".into(), "work<u64>"),
            "fixture::other"
        );
        assert_eq!(
            with_rust_generics("a::b::{{closure}}".into(), "{closure#0}<u8>"),
            "a::b::{{closure}}::<u8>"
        );
    }
}
