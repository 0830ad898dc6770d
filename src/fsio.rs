//! Every file planner reads or writes by a user-given name goes through here (README "Limits").
//!
//! Reading: the file is opened without blocking (`O_NONBLOCK`, so a FIFO without a writer cannot hang the open)
//! and must be a regular file: a FIFO, socket, device or directory is refused (exit 2) because a read from it
//! cannot be bounded in time. At most `limits::MAX_INPUT_FILE_BYTES` are read.
//!
//! Writing: the bytes go to a temporary file created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`, a random name)
//! in the target's directory, are synced, and the temporary file is renamed over the target, so a reader sees the
//! old file or the new one, never half of one, and a name a user (or an attacker) left next to the output (such as
//! `OUT.tmp`) is never followed, replaced or deleted. A symlink is written through: the link stays and its target
//! is replaced. Anything that is not a regular file (a device node, FIFO, socket, directory) is refused, not
//! replaced. Exit codes: a missing directory, a path that is not a regular file, no permission: bad input (2);
//! a full disk or an I/O error: runtime (1).

use crate::error::{Error, Result};

/// Text from an input file (a log, a plan, a result file) made safe to echo on a terminal or into a log: one
/// line, every control character (newline, ESC of an escape sequence) replaced by a space. The tuner plugin uses
/// the same function for what it writes into NCCL's log.
pub(crate) use nccl_tuner_planner::plan::printable;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A text file's content with what a terminal would act on made a space: every control character but the tab and
/// the line ends (`\n`, and `\r` right before it), and the invisible reordering characters (`printable`). Lines stay
/// lines, so line numbers and parsing are unchanged; a file without such characters is returned as it is (no copy).
/// For the readers that quote lines of an input (nccl-tests output, logs) back on the terminal.
pub fn printable_lines(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char, next: Option<char>| {
        let invisible = matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        invisible
            || (c.is_control() && c != '\n' && c != '\t' && !(c == '\r' && next == Some('\n')))
    };
    let mut chars = text.chars().peekable();
    let mut clean = true;
    while let Some(c) = chars.next() {
        if bad(c, chars.peek().copied()) {
            clean = false;
            break;
        }
    }
    if clean {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(if bad(c, chars.peek().copied()) {
            ' '
        } else {
            c
        });
    }
    std::borrow::Cow::Owned(out)
}

/// Every string of a JSON document read from a file made `printable` (control characters and escape sequences
/// become spaces), but for the values of the keys in `keep` (documents kept verbatim, such as a topology XML whose
/// hash is checked): a result file's host names, GPU names, versions, notes and reasons are echoed on the terminal
/// by `--load`, and a terminal must not take an escape sequence from a file. Object keys are left as they are
/// (readers refuse keys they do not know). Linear in the document.
pub fn printable_strings(value: &mut serde_json::Value, keep: &[&str]) {
    use serde_json::Value;
    match value {
        Value::String(text) => *text = printable(text),
        Value::Array(items) => {
            for item in items {
                printable_strings(item, keep);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if !keep.contains(&key.as_str()) {
                    printable_strings(item, keep);
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A user-named input file as text, at most `limits::MAX_INPUT_FILE_BYTES` long; an unreadable, non-regular or
/// larger file is bad input naming it (and the limit). Every reader of a named file goes through this or
/// `read_input_bytes`.
pub(crate) fn read_input_file(path: &str) -> Result<String> {
    // The message std's read_to_string gives, as before the cap.
    String::from_utf8(read_input_bytes(path)?).map_err(|_| {
        Error::bad_input(format!(
            "{path}: cannot read: stream did not contain valid UTF-8"
        ))
    })
}

/// A user-named input file as bytes, with the same checks as `read_input_file`.
pub(crate) fn read_input_bytes(path: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_input(path)?
        .take(crate::limits::MAX_INPUT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::bad_input(format!("{path}: cannot read: {e}")))?;
    // A file that grew after it was opened stops one byte past the cap.
    check_cap(path, bytes.len() as u64)?;
    Ok(bytes)
}

/// The input file opened for reading: a regular file within the cap (its size says so before any read).
pub(crate) fn open_input(path: &str) -> Result<File> {
    // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever; O_NOCTTY: a terminal named as
    // input never becomes the controlling terminal. Neither changes how a regular file reads.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::bad_input(format!("{path}: cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::bad_input(format!("{path}: cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(Error::bad_input(format!(
            "{path}: is {}, not a regular file (planner reads only regular files: a read from it has no bound)",
            kind_of(meta.file_type())
        )));
    }
    check_cap(path, meta.len())?;
    Ok(file)
}

/// Why `path` cannot be a named file the planner hands on without reading it (a plugin): `None` for a regular
/// file (symlinks followed), else the reason — "no such file", or what it is instead of a regular file.
pub(crate) fn not_a_regular_file(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => None,
        Ok(meta) => Some(format!(
            "is {}, not a regular file",
            kind_of(meta.file_type())
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Some("no such file".to_string()),
        Err(e) => Some(format!("cannot read: {e}")),
    }
}

fn check_cap(path: &str, len: u64) -> Result<()> {
    let cap = crate::limits::MAX_INPUT_FILE_BYTES;
    if len > cap {
        return Err(Error::bad_input(format!(
            "{path}: larger than the {} MiB input file limit",
            cap >> 20
        )));
    }
    Ok(())
}

/// What a file that is not a regular file is, for messages.
fn kind_of(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

/// Write `bytes` to the user-named output `path` atomically (module comment).
pub(crate) fn write_output(path: &str, bytes: &[u8]) -> Result<()> {
    write_output_with(path, |w| w.write_all(bytes))
}

/// Check that `path` can be written as an output (its directory exists, it is a regular file or absent) without
/// writing it: for commands that run long before they write, so a bad `--out` is refused at once.
pub(crate) fn check_output_path(path: &str) -> Result<()> {
    output_target(path).map(|_| ())
}

/// Like `write_output`, with the content written by `write` into a buffered writer (for outputs written as they
/// are produced). An error from `write` leaves the target untouched and the temporary file removed.
pub(crate) fn write_output_with(
    path: &str,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let target = output_target(path)?;
    let (temp, file) = create_temp_beside(&target, path)?;
    let written = (|| -> io::Result<()> {
        let mut w = io::BufWriter::new(&file);
        write(&mut w)?;
        w.flush()?;
        drop(w);
        if let Ok(meta) = std::fs::metadata(&target) {
            // The new file keeps the mode of the one it replaces.
            file.set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode()))?;
        }
        file.sync_all()?;
        std::fs::rename(&temp, &target)
    })();
    if let Err(e) = written {
        // Ours alone: created exclusively above under a random name.
        let _ = std::fs::remove_file(&temp);
        return Err(output_error(path, &e));
    }
    // The rename is durable once the directory is synced; a directory that cannot be opened or synced (some
    // file systems) leaves the file written all the same.
    if let Ok(dir) = File::open(parent_of(&target)) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Where `path` is really written: symlinks followed to their final target (which may not exist yet), which must be
/// absent or a regular file, in a directory that exists.
fn output_target(path: &str) -> Result<PathBuf> {
    if path.is_empty() {
        return Err(Error::bad_input("an empty output path"));
    }
    let target = resolve_symlinks(path)?;
    match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.is_file() => Ok(target),
        Ok(meta) => Err(Error::bad_input(format!(
            "{path}: is {}, not a regular file; planner writes only regular files and replaces no other kind",
            kind_of(meta.file_type())
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = parent_of(&target);
            match std::fs::metadata(dir) {
                Ok(meta) if meta.is_dir() => Ok(target),
                Ok(_) => Err(Error::bad_input(format!(
                    "{path}: cannot write: {} is not a directory",
                    dir.display()
                ))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::bad_input(format!(
                    "{path}: cannot write: the directory {} does not exist",
                    dir.display()
                ))),
                Err(e) => Err(output_error(path, &e)),
            }
        }
        Err(e) => Err(output_error(path, &e)),
    }
}

/// `path` with every symlink at its last component followed (a link may name a file that does not exist yet: it
/// is created there). The 40 links Linux follows (`MAXSYMLINKS`) at most.
fn resolve_symlinks(path: &str) -> Result<PathBuf> {
    let mut current = PathBuf::from(path);
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current).map_err(|e| output_error(path, &e))?;
                current = if link.is_absolute() {
                    link
                } else {
                    parent_of(&current).join(link)
                };
            }
            _ => return Ok(current),
        }
    }
    Err(Error::bad_input(format!(
        "{path}: cannot write: more than 40 levels of symbolic links"
    )))
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A new file beside `target`, created exclusively under a name no other process can predict; never a symlink.
fn create_temp_beside(target: &Path, shown: &str) -> Result<(PathBuf, File)> {
    let name = target
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let dir = parent_of(target);
    let mut last_error = None;
    for attempt in 0..16u32 {
        let temp = dir.join(format!(".{name}.{:016x}.tmp", random_u64(attempt)));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)
        {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(output_error(shown, &e)),
        }
    }
    let e = last_error.unwrap_or_else(|| io::Error::other("no temporary name was free"));
    Err(output_error(shown, &e))
}

/// 64 bits nobody outside this process can guess: std's `RandomState` is keyed from the OS's random source.
fn random_u64(salt: u32) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u32(salt);
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

/// An output failure as bad input (the path is wrong: missing, not permitted, read-only) or a runtime failure (the
/// machine failed: disk full, I/O error).
pub(crate) fn output_error(path: &str, e: &io::Error) -> Error {
    let message = format!("{path}: cannot write: {e}");
    let wrong_path = [
        libc::ENOENT,
        libc::EACCES,
        libc::EPERM,
        libc::EROFS,
        libc::ENOTDIR,
        libc::EISDIR,
        libc::ENAMETOOLONG,
        libc::ELOOP,
        libc::EINVAL,
    ];
    match e.raw_os_error() {
        Some(code) if wrong_path.contains(&code) => Error::bad_input(message),
        _ => Error::runtime(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("planner-fsio-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn s(p: &Path) -> &str {
        p.to_str().unwrap()
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(s(path)).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a directory entry.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn input_files_are_capped_and_regular() {
        let dir = temp_dir("in");
        let big = dir.join("big.xml");
        let f = File::create(&big).unwrap();
        f.set_len(crate::limits::MAX_INPUT_FILE_BYTES + 1).unwrap();
        let err = read_input_file(s(&big)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("64 MiB"), "{err}");
        let ok = dir.join("ok.xml");
        std::fs::write(&ok, "<a/>").unwrap();
        assert_eq!(read_input_file(s(&ok)).unwrap(), "<a/>");
        std::fs::write(&ok, [0xff, 0xfe]).unwrap();
        let err = read_input_file(s(&ok)).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
        // A FIFO without a writer is refused at once (a blocking open would wait forever), as is a directory.
        let fifo = dir.join("fifo");
        mkfifo(&fifo);
        let err = read_input_bytes(s(&fifo)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string().contains("is a FIFO, not a regular file"),
            "{err}"
        );
        let err = read_input_bytes(s(&dir)).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        // A symlink to a regular file reads the file.
        let link = dir.join("link.xml");
        std::fs::write(&ok, "<b/>").unwrap();
        symlink(&ok, &link).unwrap();
        assert_eq!(read_input_file(s(&link)).unwrap(), "<b/>");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn output_replaces_a_regular_file_atomically_and_keeps_its_mode() {
        let dir = temp_dir("out");
        let out = dir.join("out.json");
        write_output(s(&out), b"one").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"one");
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_output(s(&out), b"two").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"two");
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Nothing else is left in the directory.
        assert_eq!(entries(&dir), ["out.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_users_out_tmp_is_never_followed_replaced_or_deleted() {
        let dir = temp_dir("tmp");
        let out = dir.join("out.json");
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        // OUT.tmp as a symlink to another file, and as the user's own file.
        symlink(&victim, dir.join("out.json.tmp")).unwrap();
        write_output(s(&out), b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(dir.join("out.json.tmp"))
            .unwrap()
            .file_type()
            .is_symlink());
        std::fs::remove_file(dir.join("out.json.tmp")).unwrap();
        std::fs::write(dir.join("out.json.tmp"), "mine").unwrap();
        write_output(s(&out), b"newer").unwrap();
        assert_eq!(std::fs::read(dir.join("out.json.tmp")).unwrap(), b"mine");
        assert_eq!(std::fs::read(&out).unwrap(), b"newer");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn output_writes_through_a_symlink_to_its_target() {
        let dir = temp_dir("link");
        std::fs::create_dir(dir.join("real")).unwrap();
        let target = dir.join("real/result.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.join("result.json");
        symlink("real/result.json", &link).unwrap();
        write_output(s(&link), b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A dangling link creates its target; a loop is refused.
        let dangling = dir.join("dangling.json");
        symlink("real/created.json", &dangling).unwrap();
        write_output(s(&dangling), b"made").unwrap();
        assert_eq!(
            std::fs::read(dir.join("real/created.json")).unwrap(),
            b"made"
        );
        symlink("loop-b", dir.join("loop-a")).unwrap();
        symlink("loop-a", dir.join("loop-b")).unwrap();
        let err = write_output(s(&dir.join("loop-a")), b"x").unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn non_regular_outputs_are_refused_and_left_alone() {
        let dir = temp_dir("nodes");
        let fifo = dir.join("fifo");
        mkfifo(&fifo);
        let sub = dir.join("sub");
        std::fs::create_dir(&sub).unwrap();
        let socket = dir.join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let mut cases = vec![
            (fifo.clone(), "a FIFO"),
            (sub, "a directory"),
            (socket, "a socket"),
        ];
        // A character device made here (as /dev/null's numbers, 1:3) when this runs as root; never /dev itself.
        let node = dir.join("null-node");
        let c = std::ffi::CString::new(s(&node)).unwrap();
        // SAFETY: a valid NUL-terminated path; mknod only creates a directory entry (it fails when not root).
        if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0 {
            cases.push((node, "a character device"));
        }
        // A symlink to a FIFO is refused as the FIFO.
        let link = dir.join("link-to-fifo");
        symlink(&fifo, &link).unwrap();
        cases.push((link, "a FIFO"));
        for (path, kind) in cases {
            let before = std::fs::symlink_metadata(&path).unwrap().file_type();
            let err = write_output(s(&path), b"{}").unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
            assert!(err.to_string().contains(s(&path)), "{err}");
            assert!(err.to_string().contains(kind), "{kind}: {err}");
            assert_eq!(check_output_path(s(&path)).unwrap_err(), err);
            assert_eq!(
                std::fs::symlink_metadata(&path).unwrap().file_type(),
                before
            );
        }
        assert!(!entries(&dir).iter().any(|n| n.ends_with(".tmp")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn output_failures_have_one_exit_code_each() {
        let dir = temp_dir("codes");
        let missing = dir.join("no/such/dir/out.json");
        let err = write_output(s(&missing), b"x").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("does not exist"), "{err}");
        let file = dir.join("file");
        std::fs::write(&file, "x").unwrap();
        let err = write_output(s(&file.join("out.json")), b"x").unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        // A full disk is a runtime failure, and leaves neither the target nor a temporary file.
        let out = dir.join("out.json");
        let err = write_output_with(s(&out), |_| Err(io::Error::from_raw_os_error(libc::ENOSPC)))
            .unwrap_err();
        assert_eq!(err.exit_code(), 1, "{err}");
        assert!(err.to_string().contains("out.json"), "{err}");
        assert_eq!(entries(&dir), ["file"]);
        let io_error = output_error("x", &io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(io_error.exit_code(), 1);
        let denied = output_error("x", &io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(denied.exit_code(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
