//! `purloin::fs`: whole-file helpers and `File` (Read/Write/Seek) from green threads, with
//! many green threads reading at once on one worker; errors keep the OS error.
#![cfg(not(loom))]

mod net_common;

use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use net_common::{payload, rt, watchdog};
use purloin::fs::{self, File};

fn temp_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("purloin-fs-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// 500 green threads on one worker each write, read back and remove their own file.
#[test]
fn many_green_threads_read_and_write() {
    let _w = watchdog("many_green_threads_read_and_write", 120);
    let dir = temp_dir("many");
    rt(1).block_on(|| {
        let handles: Vec<_> = (0..500u64)
            .map(|i| {
                let path = dir.join(format!("f{i}"));
                purloin::spawn(move || {
                    let data = payload(i, 1000 + i as usize);
                    fs::write(&path, &data).unwrap();
                    assert!(fs::read(&path).unwrap() == data);
                    assert_eq!(fs::metadata(&path).unwrap().len(), data.len() as u64);
                    fs::remove_file(&path).unwrap();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn file_read_write_seek() {
    let _w = watchdog("file_read_write_seek", 60);
    let dir = temp_dir("file");
    rt(2).block_on(|| {
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(b"hello world").unwrap();
        f.sync_all().unwrap();
        f.seek(SeekFrom::Start(6)).unwrap();
        f.write_all(b"WORLD").unwrap();
        drop(f);
        assert_eq!(fs::read_to_string(&path).unwrap(), "hello WORLD");
        let mut f = File::open(&path).unwrap();
        assert_eq!(f.seek(SeekFrom::End(-5)).unwrap(), 6);
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "WORLD");
        let f = File::open_with(std::fs::OpenOptions::new().append(true), &path).unwrap();
        (&f).write_all(b"!").unwrap();
        f.set_len(5).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"hello");
        fs::rename(&path, dir.join("g")).unwrap();
        assert_eq!(fs::read(dir.join("g")).unwrap(), b"hello");
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_keep_the_os_error() {
    let dir = temp_dir("errors");
    let e = fs::read(dir.join("missing")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    std::fs::write(dir.join("bad"), [0xff, 0xfe]).unwrap();
    assert_eq!(fs::read_to_string(dir.join("bad")).unwrap_err().kind(), ErrorKind::InvalidData);
    rt(1).block_on(|| {
        let e = File::open(dir.join("missing")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    });
    std::fs::remove_dir_all(&dir).unwrap();
}
