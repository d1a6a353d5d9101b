//! A code object's DWARF line table: which source line an address was compiled from. The
//! kernels are built with `-gline-tables-only` (`w4a16_kernels::amd`), which leaves the machine
//! code byte-identical and adds only the line table; block coverage names each block that never
//! ran by its source line through it.

use gimli::{EndianSlice, RunTimeEndian, SectionId};
use object::{Object, ObjectSection};

/// Why a line table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LinesError {
    #[error("not a readable ELF code object: {0}")]
    Elf(#[from] object::Error),
    #[error("unreadable DWARF: {0}")]
    Dwarf(#[from] gimli::Error),
}

/// A source position: the file as the compiler named it (a kernel source relative to the
/// checkout, `kernels/hip/skinny.hip`) and its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
}

impl std::fmt::Display for SourceLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Rows of the line programs, by address: from each row's address to the next row's, code of
/// `files[file]` at `line` (0: no line, e.g. past a sequence's end).
#[derive(Clone, Debug, Default)]
pub struct LineTable {
    rows: Vec<(u64, usize, u32)>,
    files: Vec<String>,
}

/// A path as the report shows it: from `kernels/hip/` on for the kernel sources (no machine's
/// checkout folder), else as the compiler wrote it.
fn shown(path: &str) -> String {
    match path.find("kernels/hip/") {
        Some(at) => path[at..].to_string(),
        None => path.to_string(),
    }
}

impl LineTable {
    /// The line table of the ELF code object `elf`; empty when it has none (built without
    /// line tables).
    pub fn read(elf: &[u8]) -> Result<LineTable, LinesError> {
        let file = object::File::parse(elf)?;
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let load = |id: SectionId| -> Result<EndianSlice<'_, RunTimeEndian>, gimli::Error> {
            let data = file
                .section_by_name(id.name())
                .and_then(|s| s.data().ok())
                .unwrap_or(&[]);
            Ok(EndianSlice::new(data, endian))
        };
        let dwarf = gimli::Dwarf::load(load)?;
        let mut table = LineTable::default();
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            let Some(program) = unit.line_program.clone() else {
                continue;
            };
            let mut rows = program.rows();
            while let Some((header, row)) = rows.next_row()? {
                if row.end_sequence() {
                    table.rows.push((row.address(), 0, 0));
                    continue;
                }
                let line = row.line().map_or(0, |l| l.get() as u32);
                let name = match row.file(header) {
                    Some(f) => {
                        let mut path = String::new();
                        if let Some(dir) = f.directory(header) {
                            let dir = dwarf.attr_string(&unit, dir)?;
                            path.push_str(&dir.to_string_lossy());
                            path.push('/');
                        }
                        let name = dwarf.attr_string(&unit, f.path_name())?;
                        let name = name.to_string_lossy();
                        if name.starts_with('/') {
                            path.clear();
                        }
                        path.push_str(&name);
                        shown(&path)
                    }
                    None => String::new(),
                };
                let index = match table.files.iter().position(|f| *f == name) {
                    Some(i) => i,
                    None => {
                        table.files.push(name);
                        table.files.len() - 1
                    }
                };
                table.rows.push((row.address(), index, line));
            }
        }
        // Stable: within one address, the later row (the one the program settled on) wins.
        table.rows.sort_by_key(|r| r.0);
        Ok(table)
    }

    /// The source line of the code at `addr`, if the table gives one.
    pub fn line_of(&self, addr: u64) -> Option<SourceLine> {
        let after = self.rows.partition_point(|r| r.0 <= addr);
        let (_, file, line) = *self.rows.get(after.checked_sub(1)?)?;
        (line != 0).then(|| SourceLine {
            file: self.files[file].clone(),
            line,
        })
    }

    /// Does the table have any row (was the code object built with line tables)?
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_sources_are_shown_from_the_checkout_and_others_as_written() {
        assert_eq!(
            shown("/work/x/kernels/hip/skinny.hip"),
            "kernels/hip/skinny.hip"
        );
        assert_eq!(
            shown("/usr/include/hip/amd_detail/x.h"),
            "/usr/include/hip/amd_detail/x.h"
        );
        let t = LineTable {
            rows: vec![(0x100, 0, 10), (0x108, 0, 0), (0x110, 0, 12), (0x120, 0, 0)],
            files: vec!["kernels/hip/k.hip".into()],
        };
        assert_eq!(t.line_of(0xfc), None);
        assert_eq!(
            t.line_of(0x104).unwrap().to_string(),
            "kernels/hip/k.hip:10"
        );
        assert_eq!(t.line_of(0x10c), None);
        assert_eq!(t.line_of(0x11c).unwrap().line, 12);
        assert_eq!(t.line_of(0x120), None);
    }
}
