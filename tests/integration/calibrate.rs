//! `calibrate`: every input format, bad inputs, the calibration file, and the
//! model fitted on one committed 2x H200 run and scored on another.

use planner::calibrate::{
    self, cv::CvSection, Calibration, FitOptions, InputFormat, Measurements, ReadOptions,
};
use planner::measure::Backend;
use planner::model::Pair;
use planner::model::{Algo, Coll, Proto};

fn path(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> Measurements {
    calibrate::read_file(&path(rel), &ReadOptions::default()).unwrap()
}

fn read_err(text: &str, options: &ReadOptions) -> String {
    let e = calibrate::read_text(text, "input.txt", options).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    e.to_string()
}

const FINAL: &str = "bench/results/verify-h200x2-final-2026-11-30/verify.json";
const PROCS_1: &str = "bench/results/verify-h200x2-procs-2026-11-30/nccl-eager-1proc.json";
const PROCS_2: &str = "bench/results/verify-h200x2-procs-2026-11-30/nccl-eager-2proc.json";
const INTEGRATION: &str = "bench/results/integration-h200x2-2026-11-30/verify.json";
const J_JSON: &str = "tests/data/calibrate/nccl-tests-J-ring-ll.json";
const TEXT: &str = "tests/data/calibrate/nccl-tests-ring-ll.txt";
const INSPECTOR: &str = "tests/data/calibrate/nccl-inspector-allreduce.jsonl";

fn ring_ll() -> Pair {
    Pair::new(Algo::Ring, Proto::Ll)
}

// ---------------------------------------------------------------------------
// Input formats

#[test]
fn verify_files_give_both_backends_with_free_choice_attributed() {
    let m = read(FINAL);
    assert_eq!(m.format, InputFormat::PlannerVerify);
    // 390 rows, all ok: 6 pairs x 30 sizes native, 6 x 30 + 30 free-choice NCCL
    assert_eq!(m.rows.len(), 390);
    let nccl: Vec<_> = m
        .rows
        .iter()
        .filter(|r| r.backend == Backend::Nccl)
        .collect();
    assert_eq!(nccl.len(), 210);
    let auto: Vec<_> = nccl.iter().filter(|r| r.pair.is_none()).collect();
    assert_eq!(auto.len(), 30);
    // NCCL's choice is recorded for every free-choice row: Ring/LL up to 1 MiB,
    // Ring/Simple from 2 MiB (tests/golden/.../nccl-allreduce-choices.txt)
    let at = |b: u64| auto.iter().find(|r| r.bytes == b).unwrap().fit_pair();
    assert_eq!(at(1 << 20), Some(ring_ll()));
    assert_eq!(at(2 << 20), Some(Pair::new(Algo::Ring, Proto::Simple)));
    // the stock prediction of pinned rows comes along: Ring/LL at 8 B, 7.80 µs
    // as the file recorded it
    let r = nccl
        .iter()
        .find(|r| r.pair == Some(ring_ll()) && r.bytes == 8)
        .unwrap();
    assert!((r.stock_us.unwrap() - 7.8).abs() < 0.01, "{:?}", r.stock_us);
    assert_eq!(r.repeats, Some(5));
    // the first row's line: where the first element of "rows" starts in the file
    let text = std::fs::read_to_string(path(FINAL)).unwrap();
    let rows_at = text.find("\"rows\": [").unwrap();
    let first = rows_at + text[rows_at..].find('{').unwrap();
    let line = text[..first].matches('\n').count() + 1;
    assert_eq!(m.rows[0].line, line);
    assert!(m.rows[1].line > line);
    assert_eq!(m.machine.gpu_count, Some(2));
    assert_eq!(m.machine.nccl_version.as_deref(), Some("2.28.3"));
    assert_eq!(m.machine.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(m.fnv1a64.len(), 16);
}

#[test]
fn topology_hash_ignores_per_boot_ids_but_not_links() {
    // Three runs on three boots: the files' own hashes differ (host_hash)...
    let raw: Vec<String> = [FINAL, PROCS_1, INTEGRATION]
        .iter()
        .map(|f| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path(f)).unwrap()).unwrap();
            v["machine"]["topology_hash"].as_str().unwrap().to_string()
        })
        .collect();
    assert_ne!(raw[0], raw[1]);
    assert_ne!(raw[0], raw[2]);
    // ...the calibration's hash does not, and equals that of NCCL's own dump.
    let hashes: Vec<String> = [FINAL, PROCS_1, INTEGRATION]
        .iter()
        .map(|f| read(f).machine.topology_hash.unwrap())
        .collect();
    assert_eq!(hashes[0], hashes[1]);
    assert_eq!(hashes[0], hashes[2]);
    let dump = std::fs::read_to_string(path("fixtures/h200x2-nvswitch-vm.xml")).unwrap();
    let h = calibrate::topology_hash(&dump, "dump").unwrap();
    assert_eq!(h, hashes[0]);
    // Renumbered buses, another host hash, another NIC name: same kind of machine.
    let other = dump
        .replace("0xa6e8e9058c10d6af", "0x1234")
        .replace("0000:00:06.0", "0000:1b:00.0")
        .replace("0000:00:07.0", "0000:2c:00.0")
        .replace("name=\"eth0\"", "name=\"ens5\"");
    assert_eq!(calibrate::topology_hash(&other, "other").unwrap(), h);
    // What the model uses changes the hash: NVLink count, GPU arch, PCIe width.
    for (from, to) in [
        ("count=\"18\"", "count=\"12\""),
        ("sm=\"90\"", "sm=\"80\""),
        ("link_width=\"0\"", "link_width=\"16\""),
    ] {
        let changed = dump.replacen(from, to, 1);
        assert_ne!(
            calibrate::topology_hash(&changed, "changed").unwrap(),
            h,
            "{from} -> {to}"
        );
    }
    // Another machine altogether.
    let hgx = std::fs::read_to_string(path("fixtures/hgx-h200-8.xml")).unwrap();
    assert_ne!(calibrate::topology_hash(&hgx, "hgx").unwrap(), h);
}

#[test]
fn nccl_tests_json_pins_the_pair_from_its_env() {
    let m = read(J_JSON);
    assert_eq!(m.format, InputFormat::NcclTestsJson);
    // 12 sizes (8 B x4 .. 32 MiB), out-of-place and in-place
    assert_eq!(m.rows.len(), 24);
    assert!(m
        .rows
        .iter()
        .all(|r| r.pair == Some(ring_ll()) && r.coll == Coll::AllReduce));
    assert_eq!(m.machine.nccl_version.as_deref(), Some("2.28.3")); // 22803
    assert_eq!(m.machine.gpu_count, Some(2)); // 1 thread x 2 GPUs x 1 process
    let first = &m.rows[0];
    assert_eq!(
        (first.bytes, first.in_place, first.time_us),
        (8, Some(false), 15.6151)
    );
    assert_eq!(
        (m.rows[1].in_place, m.rows[1].time_us),
        (Some(true), 13.7078)
    );
    // the line where results[0] starts
    let text = std::fs::read_to_string(path(J_JSON)).unwrap();
    let at = text.find("\"results\": [").unwrap();
    let first_obj = at + text[at..].find('{').unwrap();
    assert_eq!(first.line, text[..first_obj].matches('\n').count() + 1);
}

#[test]
fn nccl_tests_text_reads_like_its_json_and_takes_the_pair_from_the_log() {
    let text = read(TEXT);
    let json = read(J_JSON);
    assert_eq!(text.format, InputFormat::NcclTestsText);
    assert_eq!(text.rows.len(), json.rows.len());
    for (t, j) in text.rows.iter().zip(&json.rows) {
        assert_eq!(
            (t.bytes, t.in_place, t.pair, t.coll),
            (j.bytes, j.in_place, j.pair, j.coll)
        );
        // the text rounds to 2 decimals
        assert!(
            (t.time_us - j.time_us).abs() <= 0.005 + 1e-9,
            "{} {}",
            t.time_us,
            j.time_us
        );
    }
    // 32 MiB: line 27 of the file, in-place 284.27 µs
    let last = text.rows.last().unwrap();
    assert_eq!(
        (last.bytes, last.line, last.time_us),
        (33554432, 27, 284.27)
    );
    assert_eq!(text.machine.gpu_count, Some(2));
    assert_eq!(text.machine.gpus, vec!["NVIDIA H200", "NVIDIA H200"]);
    assert_eq!(text.machine.nccl_version.as_deref(), Some("2.28.3"));
}

#[test]
fn nccl_tests_text_pair_from_option_or_free_choice() {
    let full = std::fs::read_to_string(path(TEXT)).unwrap();
    let no_log: String = full
        .lines()
        .filter(|l| !l.contains("NCCL INFO"))
        .map(|l| format!("{l}\n"))
        .collect();
    // without a log and without --pair: NCCL's free choice
    let m = calibrate::read_text(&no_log, "t.txt", &ReadOptions::default()).unwrap();
    assert!(m.rows.iter().all(|r| r.pair.is_none()));
    // --pair pins it
    let tree = Pair::new(Algo::Tree, Proto::Ll);
    let opts = ReadOptions {
        pair: Some(tree),
        coll: None,
    };
    let m = calibrate::read_text(&no_log, "t.txt", &opts).unwrap();
    assert!(m.rows.iter().all(|r| r.pair == Some(tree)));
    // --pair against the log: refused, naming both
    let e = read_err(&full, &opts);
    assert!(
        e.contains("--pair Tree/LL contradicts") && e.contains("Ring/LL"),
        "{e}"
    );
    // a list in NCCL_ALGO leaves NCCL a choice: rows are auto
    let listed = full.replace("to Ring", "to Ring,Tree");
    let m = calibrate::read_text(&listed, "t.txt", &ReadOptions::default()).unwrap();
    assert!(m.rows.iter().all(|r| r.pair.is_none()));
    // two ranks disagreeing on NCCL_PROTO: the line of the second
    let split = full.replacen(
        "[1] NCCL INFO NCCL_PROTO set by environment to LL",
        "[1] NCCL INFO NCCL_PROTO set by environment to Simple",
        1,
    );
    let e = read_err(&split, &ReadOptions::default());
    assert!(
        e.starts_with("input.txt:11: NCCL_PROTO set to Simple here but to LL on line 9"),
        "{e}"
    );
    // without the program line the collective must be given
    let no_program = full.replace("# Collective test starting: all_reduce_perf\n", "");
    let e = read_err(&no_program, &ReadOptions::default());
    assert!(e.contains("give --coll"), "{e}");
    let opts = ReadOptions {
        pair: None,
        coll: Some(Coll::AllGather),
    };
    let m = calibrate::read_text(&no_program, "t.txt", &opts).unwrap();
    assert!(m.rows.iter().all(|r| r.coll == Coll::AllGather));
    // under mpirun --tag-output every line carries `[1,0]<stdout>:`
    let tagged: String = full
        .lines()
        .map(|l| format!("[1,0]<stdout>:{l}\n"))
        .collect();
    let m = calibrate::read_text(&tagged, "t.txt", &ReadOptions::default()).unwrap();
    assert_eq!(m.rows.len(), 24);
    assert!(m.rows.iter().all(|r| r.pair == Some(ring_ll())));
}

#[test]
fn inspector_rows_are_nccls_free_choice_per_size() {
    let m = read(INSPECTOR);
    assert_eq!(m.format, InputFormat::NcclInspector);
    assert!(m
        .rows
        .iter()
        .all(|r| r.pair.is_none() && r.backend == Backend::Nccl));
    assert_eq!(m.machine.gpu_count, Some(2));
    assert_eq!(m.machine.nccl_version.as_deref(), Some("2.28.3")); // git_rev v2.28.3-1
                                                                   // Every size the run touched, warm-up doublings included: 8 B .. 1 GiB
                                                                   // but 1 KiB, which the file has no record of (27 sizes).
    let sizes: Vec<u64> = m.rows.iter().map(|r| r.bytes).collect();
    assert_eq!(sizes.len(), 27);
    assert!(!sizes.contains(&1024));
    assert_eq!((sizes[0], *sizes.last().unwrap()), (8, 1 << 30));
    // 2 MiB: calls reported by both ranks, slowest rank each:
    // 34 32 36 35 36 34 41 37 35 -> median 35 µs (by hand from the file)
    let at = |b: u64| m.rows.iter().find(|r| r.bytes == b).unwrap();
    assert_eq!(at(2 << 20).time_us, 35.0);
    assert_eq!(at(2 << 20).repeats, Some(9));
    // 8 B: complete calls 8 9 10 10 9 -> 9 µs (the 6268 µs first call had one rank)
    assert_eq!(at(8).time_us, 9.0);
    // 16 B only in warm-up, one rank each: 119 and 215 -> 167
    assert_eq!(at(16).time_us, 167.0);
}

// ---------------------------------------------------------------------------
// Bad input: exit 2, file and line named

#[test]
fn bad_inputs_name_the_file_and_line() {
    let none = ReadOptions::default();
    assert!(read_err("", &none).contains("input.txt: the file is empty"));
    let e = read_err("hello\nworld\n", &none);
    assert!(e.starts_with("input.txt:1: unknown format"), "{e}");
    // an nccl-tests row with a broken time
    let text = std::fs::read_to_string(path(TEXT))
        .unwrap()
        .replace("   286.90  ", "   28x.90  ");
    let e = read_err(&text, &none);
    assert!(
        e.starts_with("input.txt:27: malformed nccl-tests row"),
        "{e}"
    );
    assert!(e.contains("28x.90"), "{e}");
    // a collective NCCL's tuner does not model
    let text = std::fs::read_to_string(path(TEXT))
        .unwrap()
        .replace("starting: all_reduce_perf", "starting: alltoall_perf");
    let e = read_err(&text, &none);
    assert!(e.starts_with("input.txt:2: `alltoall_perf`"), "{e}");
    // a JSONL line that is not JSON
    let mut lines: Vec<String> = std::fs::read_to_string(path(INSPECTOR))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[4] = "{\"header\": ".into();
    let e = read_err(&lines.join("\n"), &none);
    assert!(e.starts_with("input.txt:5: not a JSON object"), "{e}");
    // an Inspector record without its size
    let mut lines: Vec<String> = std::fs::read_to_string(path(INSPECTOR))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[6] = lines[6].replace("coll_msg_size_bytes", "size");
    let e = read_err(&lines.join("\n"), &none);
    assert!(
        e.starts_with("input.txt:7: no integer \"coll_msg_size_bytes\""),
        "{e}"
    );
    // a -J result without a size: the line of that element
    let text = std::fs::read_to_string(path(J_JSON)).unwrap();
    let broken = text.replacen("\"size\": 32,", "\"bytes\": 32,", 1);
    let e = read_err(&broken, &none);
    assert!(e.contains("results[1]: no integer \"size\""), "{e}");
    let at = broken.find("\"bytes\": 32").unwrap();
    let obj = broken[..at].rfind('{').unwrap();
    let line = broken[..obj].matches('\n').count() + 1;
    assert!(
        e.starts_with(&format!("input.txt:{line}:")),
        "{e} (line {line})"
    );
    // a verify file of another version, and a calibration given as input
    let verify = std::fs::read_to_string(path(FINAL)).unwrap().replacen(
        "\"version\": 1",
        "\"version\": 9",
        1,
    );
    let e = read_err(&verify, &none);
    assert!(e.contains("version 9 is not supported"), "{e}");
    let e = read_err(
        "{\"format\": \"planner-calibration\", \"version\": 1}",
        &none,
    );
    assert!(e.contains("is a calibration file, not measurements"), "{e}");
    let e = read_err("{\"a\": 1}", &none);
    assert!(e.starts_with("input.txt:1: unknown JSON input"), "{e}");
    // a pretty-printed JSON broken on line 3: that position, not line 1's
    let e = read_err("{\n  \"a\": 1,\n  \"b\": ]\n}", &none);
    assert!(e.starts_with("input.txt:3:"), "{e}");
    // --pair on a verify file: it records its pairs
    let verify = std::fs::read_to_string(path(FINAL)).unwrap();
    let e = read_err(
        &verify,
        &ReadOptions {
            pair: Some(ring_ll()),
            coll: None,
        },
    );
    assert!(e.contains("--pair Ring/LL does not apply"), "{e}");
    // a missing file
    let e = calibrate::read_file("/nonexistent/x.json", &none).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e
        .to_string()
        .starts_with("/nonexistent/x.json: cannot read"));
}

// ---------------------------------------------------------------------------
// The calibration file

#[test]
fn calibration_round_trips_and_refuses_other_machines() {
    let m = read(FINAL);
    let cal = calibrate::fit(std::slice::from_ref(&m), &FitOptions::default()).unwrap();
    assert_eq!(cal.format, "planner-calibration");
    assert_eq!(cal.backend, Backend::Nccl);
    assert_eq!(cal.pairs.len(), 6);
    assert_eq!(cal.sources[0].fnv1a64, m.fnv1a64);
    assert_eq!(cal.sources[0].rows_used, 210);
    assert!(cal
        .pairs
        .iter()
        .all(|p| p.sizes == 30 && p.cv.is_some() && p.fit.is_some()));
    let json = cal.to_json().unwrap();
    for key in [
        "\"latency_us\"",
        "\"bandwidth_gbs\"",
        "\"ramp_bytes\"",
        "\"topology_hash\"",
        "\"median_abs_error_pct\"",
    ] {
        assert!(json.contains(key), "{key}");
    }
    let back = Calibration::from_json(&json, "cal.json").unwrap();
    assert_eq!(back.machine, cal.machine);
    assert_eq!(back.pairs.len(), cal.pairs.len());
    // serde_json reads a printed f64 back to within an ulp or so
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
    for (b, c) in back.pairs.iter().zip(&cal.pairs) {
        assert_eq!(
            (b.coll, b.algo, b.proto, &b.terms),
            (c.coll, c.algo, c.proto, &c.terms)
        );
        assert!(close(b.params.latency_us, c.params.latency_us));
        assert!(close(b.params.bandwidth_gbs, c.params.bandwidth_gbs));
        assert!(close(b.params.ramp_bytes, c.params.ramp_bytes));
        assert!(close(b.params.overlap, c.params.overlap));
    }
    let p = |c: &Calibration| {
        c.predict_us(Coll::AllReduce, Algo::Ring, Proto::Ll, 3 << 20)
            .unwrap()
    };
    assert!(close(p(&back), p(&cal)));
    assert!(cal
        .predict_us(Coll::AllReduce, Algo::Nvls, Proto::Simple, 1 << 20)
        .is_none());

    let hash = m.machine.topology_hash.clone().unwrap();
    assert!(back.check_applies(&hash, 2, false).is_ok());
    let e = back
        .check_applies("0123456789abcdef", 2, false)
        .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(!e.to_string().contains('\n'));
    assert!(
        e.to_string()
            .starts_with("cal.json was measured on topology"),
        "{e}"
    );
    assert!(e.to_string().contains("--force"), "{e}");
    let e = back.check_applies(&hash, 8, false).unwrap_err();
    assert!(
        e.to_string().contains("measured on 2 GPUs, this run has 8"),
        "{e}"
    );
    assert!(back.check_applies("0123456789abcdef", 8, true).is_ok());

    // other versions and formats are refused
    let e = Calibration::from_json(
        &json.replacen("\"version\": 2", "\"version\": 3", 1),
        "c.json",
    )
    .unwrap_err();
    assert!(e.to_string().contains("version 3 is not supported"), "{e}");
    let e = Calibration::from_json("{\"format\": \"planner-verify\"}", "c.json").unwrap_err();
    assert!(e.to_string().contains("not a calibration file"), "{e}");
    let e = Calibration::from_json(
        &json.replacen("\"overlap\": ", "\"overlap\": -", 1),
        "c.json",
    )
    .unwrap_err();
    assert!(e.to_string().contains("parameters out of range"), "{e}");
}

#[test]
fn inputs_of_different_machines_are_refused_unless_forced() {
    let a = read(FINAL);
    let mut b = read(PROCS_1);
    b.machine.topology_hash = Some("00000000deadbeef".into());
    let e = calibrate::fit(&[a.clone(), b.clone()], &FitOptions::default()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("differs from"), "{e}");
    let forced = FitOptions {
        force: true,
        ..FitOptions::default()
    };
    let cal = calibrate::fit(&[a, b], &forced).unwrap();
    assert!(cal.notes.iter().any(|n| n.contains("differs from")));
}

#[test]
fn a_pinned_nccl_tests_run_calibrates_its_pair() {
    // 12 sizes of Ring/LL: all four terms; 2 MiB measured 25.29 / 24.82 µs
    let m = read(J_JSON);
    let cal = calibrate::fit(std::slice::from_ref(&m), &FitOptions::default()).unwrap();
    assert_eq!(cal.pairs.len(), 1);
    assert_eq!(
        cal.pairs[0].terms,
        ["latency", "bandwidth", "ramp", "overlap"]
    );
    let t = cal
        .predict_us(Coll::AllReduce, Algo::Ring, Proto::Ll, 2 << 20)
        .unwrap();
    assert!((t / 25.05 - 1.0).abs() < 0.10, "{t}");
    // the free-choice Inspector file alone has nothing to fit
    let e = calibrate::fit(&[read(INSPECTOR)], &FitOptions::default()).unwrap_err();
    assert!(e.to_string().contains("free choice"), "{e}");
}

// ---------------------------------------------------------------------------
// Fit on one committed run, score on another

fn cross(train: &str, test: &str, backend: Backend) -> CvSection {
    let inputs = [read(train), read(test)];
    let options = FitOptions {
        backend,
        ..FitOptions::default()
    };
    let report = calibrate::cross_validate(&inputs, &options).unwrap();
    // k-fold over both, then train on each / test on the other
    assert_eq!(report.sections.len(), 3);
    report
        .sections
        .into_iter()
        .find(|s| s.train == [path(train)] && s.test == [path(test)])
        .unwrap()
}

fn stat(s: &CvSection, regime: &str, f: fn(&calibrate::stats::ErrorStats) -> f64) -> f64 {
    f(s.regime(regime).unwrap().calibrated.as_ref().unwrap())
}

#[test]
fn nccl_fitted_on_one_run_predicts_another() {
    // final (thread per GPU, 01:17) -> procs/1proc (thread per GPU, 00:56)
    let s = cross(FINAL, PROCS_1, Backend::Nccl);
    let median = |r| stat(&s, r, |e| e.median_abs_error_pct);
    // issue 11 targets, met on these runs:
    assert!(median(">= 64 KiB") <= 5.0, "{}", median(">= 64 KiB"));
    assert!(stat(&s, ">= 64 KiB", |e| e.p95_abs_error_pct) <= 15.0);
    assert!(stat(&s, ">= 1 MiB", |e| e.worst_abs_error_pct) <= 15.0);
    assert!(median("< 64 KiB") <= 10.0);
    // Met since the second ramp (NCCL's Ring/Simple and Ring/LL128 bandwidth
    // keeps creeping up to 4 GiB): regret of the calibrated pick from 1 MiB is
    // 1.8 % (one ramp: 4.7 %, at 128 MiB). NCCL's own pick loses 28.4 % (2 MiB).
    let regret = s.regime(">= 1 MiB").unwrap();
    assert!(regret.calibrated_regret_worst_pct.unwrap() <= 2.0);
    assert!(regret.stock_regret_worst_pct.unwrap() > 25.0);
    // calibrated beats the stock model in every regime, by a wide margin
    for r in &s.regimes {
        let cal = r.calibrated.as_ref().unwrap().median_abs_error_pct;
        let stock = r.stock.as_ref().unwrap().median_abs_error_pct;
        assert!(cal * 3.0 < stock, "{}: {cal} vs {stock}", r.regime);
    }
    // The runs themselves agree within 1 % (median) from 1 MiB, so the
    // remaining error there is the model's, not noise...
    let r2r = s.regime(">= 1 MiB").unwrap().run_to_run.as_ref().unwrap();
    assert!(r2r.median_abs_error_pct < 1.0);
    // ...while below 1 MiB the LL pairs move by up to 15 % between processes
    // (worst run-to-run in 64 KiB - 1 MiB), which bounds any model there.
    let r2r = s
        .regime("64 KiB - 1 MiB")
        .unwrap()
        .run_to_run
        .as_ref()
        .unwrap();
    assert!(r2r.worst_abs_error_pct > 10.0);
}

#[test]
fn nccl_fitted_on_one_process_predicts_two_processes() {
    let s = cross(PROCS_1, PROCS_2, Backend::Nccl);
    assert!(stat(&s, ">= 64 KiB", |e| e.median_abs_error_pct) <= 5.0);
    assert!(stat(&s, ">= 64 KiB", |e| e.p95_abs_error_pct) <= 15.0);
    assert!(stat(&s, ">= 1 MiB", |e| e.worst_abs_error_pct) <= 15.0);
    assert!(stat(&s, "< 64 KiB", |e| e.median_abs_error_pct) <= 10.0);
}

#[test]
fn native_fitted_on_one_run_predicts_another() {
    // final (01:17) -> integration (00:48), the same kernels
    let s = cross(FINAL, INTEGRATION, Backend::Native);
    assert!(stat(&s, ">= 64 KiB", |e| e.median_abs_error_pct) <= 5.0);
    assert!(stat(&s, ">= 64 KiB", |e| e.p95_abs_error_pct) <= 15.0);
    assert!(stat(&s, "< 64 KiB", |e| e.median_abs_error_pct) <= 10.0);
    let regret = s.regime(">= 1 MiB").unwrap();
    assert!(regret.calibrated_regret_worst_pct.unwrap() <= 2.0);
    // Tree/LL128 at 16 MiB was the worst (18.4 %): the native kernel runs 16 ->
    // 32 MiB at 131 GB/s after 214 GB/s for 8 -> 16 MiB (the buffers stop
    // fitting in the 60 MB L2). The L2 step, placed between two measured
    // sizes and kept because it cuts the worst training residual, brings it
    // to 12.3 %. Run-to-run: 0.2 %.
    let worst = stat(&s, ">= 1 MiB", |e| e.worst_abs_error_pct);
    assert!(worst <= 15.0, "{worst}");
    // and the other way round (it was 16.4 %, the same size)
    let back = cross(INTEGRATION, FINAL, Backend::Native);
    let worst = stat(&back, ">= 1 MiB", |e| e.worst_abs_error_pct);
    assert!(worst <= 15.0, "{worst}");
    let regret = back.regime(">= 1 MiB").unwrap();
    assert!(regret.calibrated_regret_worst_pct.unwrap() <= 2.0);
}

#[test]
fn cross_validation_report_renders_and_serialises() {
    let inputs = [read(FINAL), read(PROCS_1), read(PROCS_2)];
    let report = calibrate::cross_validate(&inputs, &FitOptions::default()).unwrap();
    // k-fold by size over the three, then 3 x 2 ordered pairs
    assert_eq!(report.sections.len(), 7);
    let k = &report.sections[0];
    assert!(k
        .method
        .starts_with("k-fold by size: 5 contiguous size bands"));
    assert_eq!(k.points, 180); // 6 pairs x 30 sizes
    assert_eq!(k.regret.len(), 30);
    let text = report.render_text();
    for needle in [
        "# cross-validation of the nccl backend",
        "run-to-run",
        "regret worst",
        "targets (issue 11):",
        "Ring/Simple",
    ] {
        assert!(text.contains(needle), "{needle}");
    }
    let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
    assert_eq!(json["sections"].as_array().unwrap().len(), 7);
    assert!(json["sections"][1]["regimes"][0]["calibrated"]["median_abs_error_pct"].is_number());
    assert_eq!(json["sections"][1]["per_pair"][0]["pair"], "Tree/LL");
    // An Inspector file as the test input: NCCL's free choice against the calibrated pick
    let inputs = [read(FINAL), read(INSPECTOR)];
    let report = calibrate::cross_validate(&inputs, &FitOptions::default()).unwrap();
    let s = report
        .sections
        .iter()
        .find(|s| s.test == [path(INSPECTOR)])
        .unwrap();
    assert_eq!(s.auto.len(), 27);
    assert_eq!(s.points, 0);
}

#[test]
fn plot_has_one_panel_per_pair_with_binary_ticks() {
    let inputs = [read(FINAL), read(PROCS_1)];
    let cal = calibrate::fit(&inputs, &FitOptions::default()).unwrap();
    let svg = calibrate::plot::render_svg(&cal, &inputs).unwrap();
    assert!(svg.starts_with("<svg"));
    for pair in Pair::ring_tree_all() {
        assert!(svg.contains(&format!("AllReduce {pair}")), "{pair}");
    }
    // plotters writes each label as `<text ...>\nLABEL\n</text>`
    for tick in [
        "\n1K\n",
        "\n1M\n",
        "\n1G\n",
        "stock NCCL model",
        "calibrated",
    ] {
        assert!(svg.contains(tick), "{tick}");
    }
    assert!(!svg.contains("\n2M\n"));
}

// ---------------------------------------------------------------------------
// The expected model's form (issue 24 item 5) and the fit's scaling (issue 28)

const V1_NCCL: &str = "bench/results/calibration-cv-2026-12-01/calibration-nccl.json";

#[test]
fn version_1_files_load_on_the_empirical_form_and_predict_as_before() {
    let cal = Calibration::load(&path(V1_NCCL)).unwrap();
    assert_eq!(cal.version, 1);
    assert_eq!(cal.form, "empirical");
    assert!(cal.expected_form.is_none());
    assert!(cal.pairs.iter().all(|p| p.physical.is_none()));
    // Ring/LL of that file (latency 10.7138 µs, 120.676 GB/s, ramp 168223 B ^0.97628, overlap 2.08379), at 3 MiB
    // by hand: transfer = 3145728 / 120676.3 x (1 + (168223 / 3145728)^0.97628) = 27.606 µs;
    // (10.7138^2.08379 + 27.606^2.08379)^(1 / 2.08379) = 29.3455 µs
    let t = cal
        .predict_us(Coll::AllReduce, Algo::Ring, Proto::Ll, 3 << 20)
        .unwrap();
    assert!((t - 29.3455).abs() < 0.001, "{t}");
}

#[test]
fn a_verify_file_calibrates_on_the_expected_form_and_round_trips() {
    let cal = calibrate::fit(&[read(FINAL)], &FitOptions::default()).unwrap();
    assert_eq!(cal.version, 2);
    assert_eq!(cal.form, "expected");
    let basis = cal.expected_form.as_ref().unwrap();
    assert_eq!(basis.machine_class, "sm90 nvswitch");
    assert_eq!(basis.nccl_family, "2.28");
    assert_eq!(basis.plan.n_ranks, 2);
    for p in &cal.pairs {
        let phys = p.physical.unwrap();
        assert!(phys.launch_us > 0.0 && phys.channel_gbs > 0.0, "{phys:?}");
        assert_eq!(p.measured_ratio.len(), 30);
        assert!(p.terms.contains(&"measured_ratio".to_string()));
    }
    // NCCL's channels per call, as its model launches them on this machine: Ring/Simple 1 below 64 KiB, 24 from
    // 768 KiB
    let table = basis
        .channels
        .iter()
        .find(|t| t.collective == Coll::AllReduce && t.pair == Pair::new(Algo::Ring, Proto::Simple))
        .unwrap();
    assert_eq!(table.channels_from_bytes.first(), Some(&[0, 1]));
    assert_eq!(table.channels_from_bytes.last(), Some(&[786432, 24]));
    // at a measured size the calibration gives the measured median (the form x its measured ratio)
    let t = cal
        .predict_us(Coll::AllReduce, Algo::Ring, Proto::Simple, 1 << 30)
        .unwrap();
    // (the median of the file's Ring/Simple rows at 1 GiB: the pinned run and NCCL's own choice of that pair)
    let mut times: Vec<f64> = read(FINAL)
        .rows
        .iter()
        .filter(|r| {
            r.backend == Backend::Nccl
                && r.fit_pair() == Some(Pair::new(Algo::Ring, Proto::Simple))
                && r.bytes == 1 << 30
        })
        .map(|r| r.time_us)
        .collect();
    times.sort_by(f64::total_cmp);
    let n = times.len();
    let measured = if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    };
    assert!(
        (t / measured - 1.0).abs() < 1e-9,
        "{t} {measured} {times:?}"
    );
    let json = cal.to_json().unwrap();
    let back = Calibration::from_json(&json, "cal.json").unwrap();
    assert_eq!(back.expected_form, cal.expected_form);
    for bytes in [8, 3 << 20, 100_000_000, 1 << 34] {
        let a = cal.predict_us(Coll::AllReduce, Algo::Tree, Proto::Ll128, bytes);
        let b = back.predict_us(Coll::AllReduce, Algo::Tree, Proto::Ll128, bytes);
        assert!((a.unwrap() / b.unwrap() - 1.0).abs() < 1e-12);
    }
    // a form this build does not know, and the expected form without its machine, are refused
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["form"] = "curve".into();
    let e = Calibration::from_json(&v.to_string(), "c.json").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("form \"curve\""), "{e}");
    v["form"] = "expected".into();
    v.as_object_mut().unwrap().remove("expected_form");
    let e = Calibration::from_json(&v.to_string(), "c.json").unwrap_err();
    assert!(e.to_string().contains("without expected_form"), "{e}");
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["pairs"][0]["physical"]["channel_gbs"] = (-1.0).into();
    let e = Calibration::from_json(&v.to_string(), "c.json").unwrap_err();
    assert!(
        e.to_string().contains("physical constants out of range"),
        "{e}"
    );
}

/// (median from 64 KiB, p95 from 64 KiB, worst from 1 MiB, worst regret from 1 MiB, median below 64 KiB), %.
fn target_figures(s: &CvSection) -> [f64; 5] {
    let mut out = [0.0; 5];
    for (o, t) in out.iter_mut().zip(&s.targets) {
        *o = t.achieved_pct.unwrap();
    }
    out
}

fn assert_figures(got: [f64; 5], want: [f64; 5], what: &str) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 0.15, "{what}: {got:?} vs {want:?}");
    }
}

#[test]
fn expected_form_k_fold_by_size_band_against_the_empirical_form() {
    // NCCL, the three runs of bench/results/calibration-cv-2026-12-01 (the figures of
    // bench/results/calibrate-expected-2026-12-03/README.md, after the expected model's 12-03b refit, whose
    // constants are the form's priors)
    let inputs = [read(FINAL), read(PROCS_1), read(PROCS_2)];
    let opts = FitOptions::default();
    let after = calibrate::cross_validate(&inputs, &opts).unwrap();
    let before = calibrate::cross_validate_with(&inputs, &opts, None).unwrap();
    assert_eq!(after.sections.len(), 7);
    // the empirical form's k-fold as committed in calibration-cv-2026-12-01 (cv-nccl.txt): misses 4 of 5
    assert_figures(
        target_figures(&before.sections[0]),
        [6.4, 36.6, 54.6, 3.8, 2.9],
        "empirical k-fold",
    );
    // the expected form: every figure but the regret better; median from 64 KiB now met, 3 of 5 still missed
    // (the 1-4 GiB creep of Ring/LL128, Ring/Simple and Tree/Simple held out; see the README)
    let k = target_figures(&after.sections[0]);
    assert_figures(k, [3.6, 18.85, 27.6, 6.95, 1.65], "expected k-fold");
    let met: Vec<bool> = after.sections[0]
        .targets
        .iter()
        .map(|t| t.met.unwrap())
        .collect();
    assert_eq!(met, [true, false, false, false, true]);
    // train on one run, test on another: all five met on all six ordered pairs, as with the empirical form
    for s in &after.sections[1..] {
        assert!(
            s.targets.iter().all(|t| t.met == Some(true)),
            "{:?}",
            s.train
        );
        let f = target_figures(s);
        assert!(f[0] <= 1.0 && f[2] <= 7.0, "{f:?}");
    }
}

#[test]
fn expected_form_k_fold_of_the_native_kernels() {
    let inputs = [read(FINAL), read(INTEGRATION)];
    let opts = FitOptions {
        backend: Backend::Native,
        ..FitOptions::default()
    };
    let after = calibrate::cross_validate(&inputs, &opts).unwrap();
    let before = calibrate::cross_validate_with(&inputs, &opts, None).unwrap();
    assert_figures(
        target_figures(&before.sections[0]),
        [7.6, 40.3, 53.3, 26.1, 2.6],
        "empirical k-fold",
    );
    // median and p95 from 64 KiB and median below it met; worst from 1 MiB and regret not
    assert_figures(
        target_figures(&after.sections[0]),
        [3.4, 13.5, 19.55, 9.6, 1.05],
        "expected k-fold",
    );
    for s in &after.sections[1..] {
        assert!(
            s.targets.iter().all(|t| t.met == Some(true)),
            "{:?}",
            s.train
        );
    }
}

fn generated(n: usize) -> Measurements {
    // n distinct sizes, log-spaced from 8 B to 4 GiB (multiples of 4), Ring/LL timed by NCCL's form with 10.5 µs
    // and 120 GB/s: time = 10.5 + bytes / 120000 µs
    let mut sizes: Vec<u64> = (0..n)
        .map(|i| {
            let b = 8.0 * 2f64.powf(29.0 * i as f64 / (n - 1) as f64);
            ((b / 4.0).round() as u64 * 4).max(8) + 4 * i as u64
        })
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    assert_eq!(sizes.len(), n);
    let rows = sizes
        .iter()
        .enumerate()
        .map(|(i, &b)| calibrate::Measurement {
            backend: Backend::Nccl,
            coll: Coll::AllReduce,
            pair: Some(ring_ll()),
            nccl_choice: None,
            bytes: b,
            time_us: 10.5 + b as f64 / 120_000.0,
            repeats: None,
            spread_pct: None,
            stock_us: None,
            in_place: None,
            per_iteration: None,
            source: "generated".into(),
            line: i + 1,
        })
        .collect();
    Measurements {
        source: "generated".into(),
        format: InputFormat::NcclTestsText,
        fnv1a64: String::new(),
        machine: Default::default(),
        rows,
        notes: Vec::new(),
    }
}

#[test]
fn thirty_thousand_sizes_fit_through_at_most_256_bins() {
    let m = generated(30_000);
    let basis = calibrate::fit(&[read(FINAL)], &FitOptions::default())
        .unwrap()
        .expected_form
        .unwrap();
    for form in [None, Some(&basis)] {
        let cal = calibrate::fit_with_basis(std::slice::from_ref(&m), &FitOptions::default(), form)
            .unwrap();
        let p = &cal.pairs[0];
        assert_eq!(p.sizes, 30_000);
        assert_eq!(p.physical.is_some(), form.is_some());
        // the fit's error over all 30,000 sizes, and at sizes between them
        let fit = p.fit.as_ref().unwrap();
        assert_eq!(fit.n, 30_000);
        assert!(fit.median_abs_error_pct < 0.5, "{fit:?}");
        for bytes in [1000u64, 1 << 20, 3_000_000_000] {
            let t = cal
                .predict_us(Coll::AllReduce, Algo::Ring, Proto::Ll, bytes)
                .unwrap();
            let truth = 10.5 + bytes as f64 / 120_000.0;
            assert!((t / truth - 1.0).abs() < 0.01, "{bytes}: {t} vs {truth}");
        }
        // the k-fold summary the file stores was computed on all of them
        let cv = cal.cross_validation.as_ref().unwrap();
        let all = cv.regimes.iter().map(|r| r.calibrated.as_ref().unwrap().n);
        assert_eq!(all.take(3).sum::<usize>(), 30_000);
    }
}
