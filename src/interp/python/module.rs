//! Recognising a CPython interpreter in a mapped file (the `python3.X` executable or
//! `libpython3.X.so`): the address range of its eval loop (`_PyEval_EvalFrameDefault`,
//! with the `.cold` part a compiler splits off), where `_PyRuntime` and `PyCode_Type`
//! are, and what may tell its version (`Py_Version` from 3.11, the file's name). All
//! in the file's own addresses; the caller adds its mapping's bias.

use crate::interp::elf_symbols;

/// What a CPython module holds, in the file's addresses (svma).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonModule {
    /// `_PyEval_EvalFrameDefault` and its split-off parts: start and end.
    pub eval: Vec<(u64, u64)>,
    /// `_PyRuntime`: the runtime state.
    pub runtime: u64,
    /// `PyCode_Type`: the type of every code object.
    pub code_type: u64,
    /// `Py_Version` (3.11+): the version as `PY_VERSION_HEX`, read from the
    /// process (the file's read-only data is not kept).
    pub py_version: Option<u64>,
    /// (major, minor) as the file's name says.
    pub name_version: Option<(u8, u8)>,
}

impl PythonModule {
    /// Whether `svma` is in the eval loop.
    pub fn in_eval(&self, svma: u64) -> bool {
        self.eval.iter().any(|&(s, e)| s <= svma && svma < e)
    }

    /// Reads the module from an ELF image; `path` is its path (its name may tell its
    /// version). None when it has no eval loop or no `_PyRuntime`: not a CPython.
    pub fn from_elf(image: &[u8], path: &str) -> Option<PythonModule> {
        use object::read::elf::Sym as _;
        let file = elf_symbols::File::parse(image).ok()?;
        let endian = file.endian();
        let mut eval = Vec::new();
        let (mut runtime, mut code_type, mut py_version) = (None, None, None);
        // Every name wanted starts so: the others (all of a large binary that is
        // not CPython, such as node's) are passed over by a compare of bytes.
        let prefixes: [&[u8]; 2] = [b"_Py", b"Py"];
        let found = [true, false]
            .into_iter()
            .flat_map(|dynamic| elf_symbols::prefixed(&file, dynamic, &prefixes));
        for (sym, name) in found {
            let (address, size) = (sym.st_value(endian), sym.st_size(endian));
            match name {
                b"_PyEval_EvalFrameDefault" | b"_PyEval_EvalFrameDefault.cold" if size > 0 => {
                    let r = (address, address + size);
                    if !eval.contains(&r) {
                        eval.push(r);
                    }
                }
                b"_PyRuntime" if address != 0 => runtime = Some(address),
                b"PyCode_Type" if address != 0 => code_type = Some(address),
                b"Py_Version" if address != 0 => py_version = Some(address),
                _ => {}
            }
        }
        if eval.is_empty() {
            return None;
        }
        Some(PythonModule {
            eval,
            runtime: runtime?,
            code_type: code_type?,
            py_version,
            name_version: version_from_name(path),
        })
    }
}

/// The version in a file name: `python3.8`, `libpython3.10.so.1.0`, `python3.12d`.
pub fn version_from_name(path: &str) -> Option<(u8, u8)> {
    let name = path.rsplit('/').next()?;
    let rest = name
        .strip_prefix("libpython")
        .or_else(|| name.strip_prefix("python"))?;
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_names() {
        assert_eq!(version_from_name("/usr/bin/python3.8"), Some((3, 8)));
        assert_eq!(
            version_from_name("/x/lib/libpython3.10.so.1.0"),
            Some((3, 10))
        );
        assert_eq!(version_from_name("python3.13t"), Some((3, 13)));
        assert_eq!(version_from_name("/usr/bin/python3"), None);
        assert_eq!(version_from_name("/usr/bin/pythonista"), None);
    }
}
