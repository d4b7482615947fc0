//! Naming addresses of a firmware ELF: the function (with the functions
//! inlined into it, innermost first) and the source line, from its DWARF
//! line tables (hilt's firmware keeps them in release builds); the symbol
//! table where DWARF says nothing (hand-written assembly, a crate built
//! without debug information).

use gimli::{EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol};

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

/// One name for an address: inlined functions come first, the function
/// the code was inlined into last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Name {
    /// Demangled, without the hash.
    pub function: String,
    /// `file:line`, the file relative to the repository where it is in it.
    pub place: Option<String>,
    /// Whether this function was inlined into the next name.
    pub inlined: bool,
}

/// The ELF's debug information and symbols.
pub(super) struct Symbols<'a> {
    context: Option<addr2line::Context<Reader<'a>>>,
    file: &'a object::File<'a>,
    repo: Option<String>,
}

impl<'a> Symbols<'a> {
    /// Over `file`; paths under `repo` are shown relative to it.
    pub(super) fn new(file: &'a object::File<'a>, repo: Option<&std::path::Path>) -> Self {
        let load = |id: gimli::SectionId| -> Result<Reader<'a>, gimli::Error> {
            let data = file
                .section_by_name(id.name())
                .and_then(|s| s.data().ok())
                .unwrap_or(&[]);
            Ok(EndianSlice::new(data, RunTimeEndian::Little))
        };
        let context = gimli::Dwarf::load(load)
            .ok()
            .and_then(|dwarf| addr2line::Context::from_dwarf(dwarf).ok());
        Symbols {
            context,
            file,
            repo: repo.map(|r| format!("{}/", r.display())),
        }
    }

    /// The names of `address`, innermost first; one `?` name when neither
    /// DWARF nor the symbol table covers it.
    ///
    /// Line tables name a function without its path (`invoke_op<…>`);
    /// the symbol table names the function the code sits in in full
    /// (`hilt_runtime::interpreter::…::run`), so that name wins for the
    /// outermost, and inlined names lose their generic arguments.
    pub(super) fn names(&self, address: u32) -> Vec<Name> {
        let mut names = self.dwarf_names(address);
        for name in &mut names {
            name.function = without_generics(&name.function);
        }
        let symbol = self.symbol(address);
        match (names.last_mut(), symbol) {
            (Some(last), Some(symbol)) => last.function = symbol,
            (None, symbol) => names.push(Name {
                function: symbol.unwrap_or_else(|| "?".to_string()),
                place: None,
                inlined: false,
            }),
            (Some(_), None) => {}
        }
        names
    }

    fn dwarf_names(&self, address: u32) -> Vec<Name> {
        let Some(context) = &self.context else {
            return Vec::new();
        };
        let Ok(mut frames) = context.find_frames(u64::from(address)).skip_all_loads() else {
            return Vec::new();
        };
        let mut names = Vec::new();
        while let Ok(Some(frame)) = frames.next() {
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.raw_name().ok())
                .map_or_else(|| "?".to_string(), |raw| demangle(&raw));
            let place = frame.location.as_ref().and_then(|l| {
                let file = self.tidy(l.file?);
                Some(match l.line {
                    Some(line) => format!("{file}:{line}"),
                    None => file.to_string(),
                })
            });
            names.push(Name {
                function,
                place,
                inlined: true,
            });
        }
        if let Some(last) = names.last_mut() {
            last.inlined = false;
        }
        names
    }

    /// The function symbol covering `address`.
    fn function_symbol(&self, address: u32) -> Option<object::Symbol<'a, 'a>> {
        let address = u64::from(address & !1);
        self.file
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text)
            .find(|s| {
                let start = s.address() & !1;
                start <= address && address < start + s.size().max(1)
            })
    }

    /// The function symbol covering `address`, demangled, without its
    /// generic arguments (`path::f::<T>` as `path::f`).
    fn symbol(&self, address: u32) -> Option<String> {
        let name = demangle(self.function_symbol(address)?.name().ok()?);
        Some(match name.split_once("::<") {
            Some((head, _)) => head.to_string(),
            None => name,
        })
    }

    /// The addresses of the function covering `address`.
    pub(super) fn function_range(&self, address: u32) -> Option<std::ops::Range<u32>> {
        let symbol = self.function_symbol(address)?;
        let start = u32::try_from(symbol.address() & !1).ok()?;
        let size = u32::try_from(symbol.size().max(1)).ok()?;
        Some(start..start.saturating_add(size))
    }

    /// A source path as a reader wants it: the repository's files from
    /// its root (hilt's firmware builds name it `/hilt`, and crates.io's
    /// `/cargo`: see `firmware::path_remapping`), a dependency's from its
    /// crate folder, the standard library's from `core/` or `alloc/`.
    fn tidy<'p>(&self, path: &'p str) -> &'p str {
        if let Some(inside) = self.repo.as_deref().and_then(|r| path.strip_prefix(r)) {
            return inside;
        }
        if let Some(inside) = path.strip_prefix("/hilt/") {
            return inside;
        }
        let after = |marker: &str| path.find(marker).map(|i| &path[i + marker.len()..]);
        if let Some(rest) = after("/registry/src/") {
            // Past the index folder: `crate-1.2.3/src/…`.
            return rest.split_once('/').map_or(rest, |(_, p)| p);
        }
        after("/library/").unwrap_or(path)
    }

    /// The address of data symbol `name`, if the ELF has it.
    pub(super) fn data_symbol(&self, name: &str) -> Option<u32> {
        self.file
            .symbols()
            .find(|s| s.name() == Ok(name))
            .and_then(|s| u32::try_from(s.address()).ok())
    }
}

/// `name<T, U>` as `name` (a line table's name of a generic function).
fn without_generics(name: &str) -> String {
    name.split_once('<')
        .map_or(name, |(head, _)| head)
        .to_string()
}

/// A Rust (or C) symbol name as people read it: demangled, without the
/// hash.
fn demangle(raw: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(raw))
}
