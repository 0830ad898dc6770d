//! The built `libnccl_tuner_planner.so`, loaded with libloading and called the way NCCL calls it
//! (`src/init.cc:1309`, `src/enqueue.cc:1925-1928` at v2.28.3-1): contiguous 7x3 cost table cast to `float**`,
//! `&nMaxChannels` starting at 0, NCCL's `ncclFunc_t` values.

mod support;

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use nccl_tuner_planner::abi::{
    NcclNvlDomainInfoV5, NcclTunerConstantsV5, NcclTunerV5, NcclTunerV6, NCCL_ALL,
    NCCL_FUNC_ALL_GATHER, NCCL_FUNC_ALL_REDUCE, NCCL_FUNC_BROADCAST, NCCL_FUNC_SEND_RECV,
    NCCL_INIT, NCCL_LOG_INFO, NCCL_LOG_WARN, NCCL_SUCCESS, NCCL_TUNING, NUM_ALGORITHMS,
    NUM_HW_LINKS, NUM_PROTOCOLS,
};
use support::{
    api, c_path, idx, nccl_like_table, nccl_pick, take_lines, write_plan, Api, PLAN_2X1, TABLE_LEN,
};

const TREE: usize = 0;
const RING: usize = 1;
const LL: usize = 0;
const LL128: usize = 1;
const SIMPLE: usize = 2;

/// A context made through the test hook (explicit plan path, NCCL version code, decision logging on).
fn init(
    api: &Api,
    n_ranks: usize,
    n_nodes: usize,
    plan: Option<&str>,
    version_code: c_int,
) -> *mut c_void {
    let path = plan.map(|text| {
        c_path(&write_plan(
            &format!("{n_ranks}x{n_nodes}-{:x}", text.len()),
            text,
        ))
    });
    init_path(api, n_ranks, n_nodes, path.as_deref(), version_code, 1)
}

fn init_path(
    api: &Api,
    n_ranks: usize,
    n_nodes: usize,
    path: Option<&CStr>,
    version_code: c_int,
    log_decisions: c_int,
) -> *mut c_void {
    let mut context: *mut c_void = ptr::null_mut();
    // SAFETY: a valid out-pointer, a NUL-terminated path or null, and a logger matching how the plugin logs.
    let rc = unsafe {
        (api.init_with_plan)(
            &mut context,
            n_ranks,
            n_nodes,
            support::logger(),
            path.map_or(ptr::null(), CStr::as_ptr),
            version_code,
            log_decisions,
        )
    };
    assert_eq!(rc, NCCL_SUCCESS);
    assert!(!context.is_null(), "init always stores a context");
    context
}

/// getCollInfo through the v5 table, as NCCL calls it; returns the new nChannels.
fn coll_info(
    api: &Api,
    context: *mut c_void,
    coll: c_int,
    bytes: usize,
    table: &mut [f32; TABLE_LEN],
) -> c_int {
    coll_info_shaped(
        api,
        context,
        coll,
        bytes,
        table,
        NUM_ALGORITHMS as c_int,
        NUM_PROTOCOLS as c_int,
    )
}

fn coll_info_shaped(
    api: &Api,
    context: *mut c_void,
    coll: c_int,
    bytes: usize,
    table: &mut [f32; TABLE_LEN],
    num_algo: c_int,
    num_proto: c_int,
) -> c_int {
    let mut n_channels: c_int = 0;
    let get = api.v5.get_coll_info.expect("getCollInfo");
    // SAFETY: the table is a live contiguous float array of 21 entries, cast to float** as NCCL does.
    let rc = unsafe {
        get(
            context,
            coll,
            bytes,
            1,
            table.as_mut_ptr().cast::<*mut f32>(),
            num_algo,
            num_proto,
            0,
            &mut n_channels,
        )
    };
    assert_eq!(rc, NCCL_SUCCESS);
    n_channels
}

fn finalize(api: &Api, context: *mut c_void) {
    // SAFETY: a context from init, finalized once.
    assert_eq!(
        unsafe { api.v5.finalize.expect("finalize")(context) },
        NCCL_SUCCESS
    );
}

/// Every entry of `after` equals `before` except `changed` (set to 0.0).
fn assert_only_zeroed(before: &[f32; TABLE_LEN], after: &[f32; TABLE_LEN], changed: usize) {
    for i in 0..TABLE_LEN {
        if i == changed {
            assert_eq!(after[i], 0.0, "entry {i} steered to 0.0");
        } else {
            assert_eq!(
                after[i].to_bits(),
                before[i].to_bits(),
                "entry {i} untouched"
            );
        }
    }
}

fn texts(lines: &[support::LogLine]) -> Vec<&str> {
    lines.iter().map(|l| l.text.as_str()).collect()
}

#[test]
fn exported_tables_have_nccl_layout_and_name() {
    let api = api();
    assert_eq!(
        std::mem::size_of::<NcclTunerV5>(),
        4 * std::mem::size_of::<usize>()
    );
    assert_eq!(
        std::mem::size_of::<NcclTunerV6>(),
        5 * std::mem::size_of::<usize>()
    );
    // SAFETY: name points at the plugin's 'static C string.
    assert_eq!(unsafe { CStr::from_ptr(api.v5.name) }, c"planner");
    // SAFETY: as above.
    assert_eq!(unsafe { CStr::from_ptr(api.v6.name) }, c"planner");
    assert!(api.v5.init.is_some() && api.v5.get_coll_info.is_some() && api.v5.finalize.is_some());
    assert!(api.v6.init.is_some() && api.v6.get_coll_info.is_some() && api.v6.finalize.is_some());
    assert!(api.v6.get_chunk_size.is_some());
}

#[test]
fn steers_each_band_and_logs_one_line_per_decision() {
    let api = api();
    take_lines();
    let ctx = init(&api, 2, 1, Some(PLAN_2X1), 22803);
    let init_lines = take_lines();
    assert_eq!(init_lines.len(), 1, "{init_lines:?}");
    assert_eq!(init_lines[0].level, NCCL_LOG_INFO);
    assert_eq!(init_lines[0].flags, NCCL_INIT | NCCL_TUNING);
    assert!(init_lines[0].text.starts_with("planner-tuner: plan /"));
    assert!(
        init_lines[0].text.ends_with(
            " applies: 4 of 4 rules for nRanks 2 nNodes 1 (from verify results.json, made with NCCL 2.28.3, running NCCL 2.28.3)"
        ),
        "{}",
        init_lines[0].text
    );

    // NCCL alone would pick Ring/LL128 on this table.
    let before = nccl_like_table();
    assert_eq!(nccl_pick(&before), Some((RING, LL128)));

    let cases: [(usize, usize, usize, c_int); 6] = [
        (1, RING, LL, 0),
        (65535, RING, LL, 0),
        (65536, TREE, SIMPLE, 4),
        (1048575, TREE, SIMPLE, 4),
        (1048576, RING, SIMPLE, 0),
        (usize::MAX - 1, RING, SIMPLE, 0),
    ];
    for (bytes, algo, proto, channels) in cases {
        let mut table = before;
        let n_channels = coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, bytes, &mut table);
        assert_only_zeroed(&before, &table, idx(algo, proto));
        assert_eq!(nccl_pick(&table), Some((algo, proto)), "{bytes} bytes");
        assert_eq!(
            n_channels, channels,
            "{bytes} bytes: nChannels only set by a rule with channels"
        );
    }
    let lines = take_lines();
    assert_eq!(
        texts(&lines),
        [
            "planner-tuner: AllReduce 1 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 0)",
            "planner-tuner: AllReduce 65535 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 0)",
            "planner-tuner: AllReduce 65536 bytes nRanks 2 nNodes 1 -> Tree/Simple channels 4 (rule 1)",
            "planner-tuner: AllReduce 1048575 bytes nRanks 2 nNodes 1 -> Tree/Simple channels 4 (rule 1)",
            "planner-tuner: AllReduce 1048576 bytes nRanks 2 nNodes 1 -> Ring/Simple channels - (rule 2)",
            "planner-tuner: AllReduce 18446744073709551614 bytes nRanks 2 nNodes 1 -> Ring/Simple channels - (rule 2)",
        ]
    );
    assert!(lines
        .iter()
        .all(|l| l.level == NCCL_LOG_INFO && l.flags == NCCL_TUNING));

    // The any-shape AllGather rule, and a collective without a rule.
    let mut table = before;
    assert_eq!(
        coll_info(&api, ctx, NCCL_FUNC_ALL_GATHER, 4096, &mut table),
        2
    );
    assert_only_zeroed(&before, &table, idx(RING, LL128));
    let mut table = before;
    assert_eq!(
        coll_info(&api, ctx, NCCL_FUNC_BROADCAST, 4096, &mut table),
        0
    );
    assert_eq!(table, before);
    assert_eq!(
        texts(&take_lines()),
        [
            "planner-tuner: AllGather 4096 bytes nRanks 2 nNodes 1 -> Ring/LL128 channels 2 (rule 3)",
            "planner-tuner: Broadcast 4096 bytes nRanks 2 nNodes 1 -> kept (no rule)",
        ]
    );
    finalize(&api, ctx);
}

#[test]
fn without_decision_logging_it_steers_silently() {
    let api = api();
    let path = c_path(&write_plan("quiet", PLAN_2X1));
    take_lines();
    let ctx = init_path(&api, 2, 1, Some(&path), 0, 0);
    assert_eq!(take_lines().len(), 1, "only the init line");
    let before = nccl_like_table();
    let mut table = before;
    coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, 100, &mut table);
    assert_only_zeroed(&before, &table, idx(RING, LL));
    assert!(take_lines().is_empty());
    finalize(&api, ctx);
}

/// Init problems: exactly one WARN line (flags NCCL_ALL, as NCCL's own WARN) and every call untouched, silently.
fn assert_inactive(api: &Api, ctx: *mut c_void, expected_warn: &dyn Fn(&str) -> bool) {
    let lines = take_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].level, NCCL_LOG_WARN);
    assert_eq!(lines[0].flags, NCCL_ALL);
    assert!(expected_warn(&lines[0].text), "{}", lines[0].text);
    for coll in 0..5 {
        for bytes in [1usize, 4096, 1 << 20, 1 << 30] {
            let before = nccl_like_table();
            let mut table = before;
            assert_eq!(coll_info(api, ctx, coll, bytes, &mut table), 0);
            assert_eq!(table, before);
        }
    }
    assert!(take_lines().is_empty(), "no decision lines without a plan");
    finalize(api, ctx);
}

#[test]
fn untouched_without_a_plan() {
    let api = api();
    take_lines();
    let ctx = init(&api, 2, 1, None, 22803);
    assert_inactive(&api, ctx, &|t| {
        t == "planner-tuner: PLANNER_TUNER_PLAN is not set; NCCL's own choices stay in place"
    });
}

#[test]
fn untouched_with_an_unreadable_plan() {
    let api = api();
    take_lines();
    let ctx = init_path(
        &api,
        2,
        1,
        Some(c"/nonexistent/planner/plan.json"),
        22803,
        1,
    );
    assert_inactive(&api, ctx, &|t| {
        t.starts_with("planner-tuner: cannot read plan /nonexistent/planner/plan.json: ")
            && t.ends_with("; NCCL's own choices stay in place")
    });
    // A directory is not a plan either.
    take_lines();
    let dir = c_path(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")));
    let ctx = init_path(&api, 2, 1, Some(&dir), 22803, 1);
    assert_inactive(&api, ctx, &|t| {
        t.starts_with("planner-tuner: cannot read plan ")
    });
}

#[test]
fn a_fifo_as_plan_never_blocks_init() {
    // NCCL calls init while it creates a communicator: a FIFO without a writer (a blocking open would wait for
    // one forever) is refused at once, and so is a FIFO whose path holds a newline meant to forge a log line.
    let api = api();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let fifo = dir.join("plan\nNCCL INFO planner-tuner: AllReduce 8 bytes -> \x1b[2Jforged");
    let c = c_path(&fifo);
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a directory entry.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    take_lines();
    let ctx = init_path(&api, 2, 1, Some(&c), 22803, 1);
    assert_inactive(&api, ctx, &|t| {
        t.starts_with("planner-tuner: cannot read plan ")
            && t.contains("not a regular file")
            && !t.contains('\n')
            && !t.contains('\x1b')
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn provenance_text_reaches_the_log_as_one_printable_line() {
    let api = api();
    let forged = PLAN_2X1
        .replace(
            "\"source_file\": \"results.json\"",
            "\"source_file\": \"r.json\\nNCCL INFO planner-tuner: AllReduce 8 bytes nRanks 2 nNodes 1 -> Ring/LL\\u001b[31m\"",
        )
        .replace("\"2x NVIDIA H200\"", "\"2x\\r\\u0007H200\"");
    take_lines();
    let ctx = init(&api, 2, 1, Some(&forged), 22803);
    let lines = take_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let text = &lines[0].text;
    assert!(text.contains("applies"), "{text}");
    assert!(text.contains("r.json NCCL INFO"), "{text}");
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(!ctx.is_null());
}

#[test]
fn untouched_with_a_garbage_plan() {
    let api = api();
    for (name, garbage) in [
        ("text", "this is not json"),
        ("truncated", &PLAN_2X1[..PLAN_2X1.len() / 2]),
        (
            "bad-algo",
            &PLAN_2X1.replace(
                "\"Tree\", \"protocol\": \"Simple\"",
                "\"Trea\", \"protocol\": \"Simple\"",
            ),
        ),
        ("empty", ""),
    ] {
        take_lines();
        let ctx = init(&api, 2, 1, Some(garbage), 22803);
        assert_inactive(&api, ctx, &|t| {
            t.starts_with("planner-tuner: invalid plan /")
                && t.ends_with("; NCCL's own choices stay in place")
                && (name != "bad-algo"
                    || t.contains("rules[1].algorithm: unknown algorithm \"Trea\""))
        });
    }
    // Not UTF-8.
    let path = write_plan("binary", "");
    std::fs::write(&path, [0xffu8, 0xfe, 0x00, 0x7b]).expect("write");
    take_lines();
    let ctx = init_path(&api, 2, 1, Some(&c_path(&path)), 22803, 1);
    assert_inactive(&api, ctx, &|t| t.contains("not UTF-8 text"));
}

#[test]
fn untouched_with_a_plan_for_another_shape() {
    let api = api();
    let only_8x1 = PLAN_2X1
        .replace("\"n_ranks\": 2", "\"n_ranks\": 8")
        .replace(
            "\"collective\": \"AllGather\", \"n_ranks\": null",
            "\"collective\": \"AllGather\", \"n_ranks\": 8",
        );
    take_lines();
    let ctx = init(&api, 2, 1, Some(&only_8x1), 22803);
    assert_inactive(&api, ctx, &|t| {
        t.starts_with("planner-tuner: plan /")
            && t.ends_with(" has no rule for nRanks 2 nNodes 1; NCCL's own choices stay in place")
    });
}

#[test]
fn other_nccl_version_warns_once_and_still_applies() {
    let api = api();
    take_lines();
    let ctx = init(&api, 2, 1, Some(PLAN_2X1), 23007);
    let lines = take_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0].level, NCCL_LOG_WARN);
    assert!(lines[0]
        .text
        .ends_with(" was made with NCCL 2.28.3, this is NCCL 2.30.7; applying it anyway"));
    assert_eq!(lines[1].level, NCCL_LOG_INFO);
    assert!(
        lines[1].text.ends_with("running NCCL 2.30.7)"),
        "{}",
        lines[1].text
    );
    let before = nccl_like_table();
    let mut table = before;
    coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, 8, &mut table);
    assert_only_zeroed(&before, &table, idx(RING, LL));
    finalize(&api, ctx);

    // The plugin cannot tell the version: no WARN, and it says so.
    take_lines();
    let ctx = init(&api, 2, 1, Some(PLAN_2X1), 0);
    let lines = take_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0]
        .text
        .ends_with("made with NCCL 2.28.3, running NCCL unknown)"));
    finalize(&api, ctx);
}

#[test]
fn masked_entries_are_never_touched() {
    let api = api();
    let ctx = init(&api, 2, 1, Some(PLAN_2X1), 22803);
    take_lines();
    // NCCL masked Ring/LL (e.g. NCCL_PROTO=^LL): the plan's pair for small sizes.
    let mut before = nccl_like_table();
    before[idx(RING, LL)] = -1.0;
    let mut table = before;
    assert_eq!(
        coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, 1024, &mut table),
        0
    );
    assert_eq!(table, before);
    // A NaN is not a usable cost either.
    before[idx(RING, LL)] = f32::NAN;
    let mut table = before;
    coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, 1024, &mut table);
    assert!(table[idx(RING, LL)].is_nan());
    // The channels of a masked rule are not applied either.
    let mut before = nccl_like_table();
    before[idx(TREE, SIMPLE)] = -1.0;
    let mut table = before;
    assert_eq!(
        coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, 100_000, &mut table),
        0
    );
    assert_eq!(table, before);
    assert_eq!(
        texts(&take_lines()),
        [
            "planner-tuner: AllReduce 1024 bytes nRanks 2 nNodes 1 -> kept (rule 0 Ring/LL masked)",
            "planner-tuner: AllReduce 1024 bytes nRanks 2 nNodes 1 -> kept (rule 0 Ring/LL masked)",
            "planner-tuner: AllReduce 100000 bytes nRanks 2 nNodes 1 -> kept (rule 1 Tree/Simple masked)",
        ]
    );
    finalize(&api, ctx);
}

#[test]
fn all_masked_table_stays_all_masked() {
    let api = api();
    let ctx = init(&api, 2, 1, Some(PLAN_2X1), 22803);
    for bytes in [1usize, 100_000, 1 << 30] {
        let mut table = [-1.0f32; TABLE_LEN];
        assert_eq!(
            coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, bytes, &mut table),
            0
        );
        assert!(table.iter().all(|&t| t == -1.0));
        assert_eq!(nccl_pick(&table), None);
    }
    finalize(&api, ctx);
}

#[test]
fn unknown_collectives_and_extreme_sizes_are_untouched() {
    let api = api();
    let ctx = init(&api, 2, 1, Some(PLAN_2X1), 22803);
    take_lines();
    let before = nccl_like_table();
    for coll in [
        NCCL_FUNC_SEND_RECV,
        6,
        11,
        14,
        15,
        -1,
        c_int::MAX,
        c_int::MIN,
    ] {
        let mut table = before;
        assert_eq!(coll_info(&api, ctx, coll, 4096, &mut table), 0);
        assert_eq!(table, before, "collective {coll}");
    }
    for bytes in [0usize, usize::MAX] {
        let mut table = before;
        assert_eq!(
            coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, bytes, &mut table),
            0
        );
        assert_eq!(table, before, "{bytes} bytes");
    }
    let lines = take_lines();
    assert_eq!(lines.len(), 10);
    assert_eq!(
        lines[0].text,
        "planner-tuner: func5 4096 bytes nRanks 2 nNodes 1 -> kept (unsupported collective)"
    );
    assert_eq!(
        lines[5].text,
        "planner-tuner: func-1 4096 bytes nRanks 2 nNodes 1 -> kept (unsupported collective)"
    );
    assert_eq!(
        lines[8].text,
        "planner-tuner: AllReduce 0 bytes nRanks 2 nNodes 1 -> kept (unsupported size)"
    );
    assert_eq!(
        lines[9].text,
        "planner-tuner: AllReduce 18446744073709551615 bytes nRanks 2 nNodes 1 -> kept (unsupported size)"
    );
    finalize(&api, ctx);
}

#[test]
fn table_shapes_out_of_range_are_untouched() {
    let api = api();
    let ctx = init(&api, 2, 1, Some(PLAN_2X1), 22803);
    take_lines();
    let before = nccl_like_table();
    for (num_algo, num_proto) in [
        (0, 3),
        (7, 0),
        (-1, 3),
        (7, -3),
        (17, 3),
        (7, 9),
        (c_int::MAX, c_int::MAX),
    ] {
        let mut table = before;
        assert_eq!(
            coll_info_shaped(
                &api,
                ctx,
                NCCL_FUNC_ALL_REDUCE,
                1024,
                &mut table,
                num_algo,
                num_proto
            ),
            0
        );
        assert_eq!(table, before, "{num_algo}x{num_proto}");
    }
    // A table of Tree only: the plan's Ring lies outside it.
    let mut table = before;
    coll_info_shaped(&api, ctx, NCCL_FUNC_ALL_REDUCE, 1024, &mut table, 1, 3);
    assert_eq!(table, before);
    // A smaller but valid shape (2 algorithms x 3 protocols) is indexed with its own row length.
    let mut table = before;
    coll_info_shaped(&api, ctx, NCCL_FUNC_ALL_REDUCE, 100_000, &mut table, 2, 3);
    assert_only_zeroed(&before, &table, idx(TREE, SIMPLE));
    let lines = take_lines();
    assert_eq!(
        lines[0].text,
        "planner-tuner: AllReduce 1024 bytes nRanks 2 nNodes 1 -> kept (unsupported table shape)"
    );
    assert_eq!(lines[7].text, "planner-tuner: AllReduce 1024 bytes nRanks 2 nNodes 1 -> kept (rule 0 Ring/LL not in table)");
    finalize(&api, ctx);
}

#[test]
fn null_pointers_are_ignored() {
    let api = api();
    let get = api.v5.get_coll_info.expect("getCollInfo");
    let mut table = nccl_like_table();
    let before = table;
    let mut n_channels: c_int = 0;
    // SAFETY: null context / table / nChannels are exactly what is being tested; the plugin checks each.
    unsafe {
        assert_eq!(
            get(
                ptr::null_mut(),
                4,
                1024,
                1,
                table.as_mut_ptr().cast(),
                7,
                3,
                0,
                &mut n_channels
            ),
            NCCL_SUCCESS
        );
        let ctx = init(&api, 2, 1, Some(PLAN_2X1), 22803);
        assert_eq!(
            get(ctx, 4, 1024, 1, ptr::null_mut(), 7, 3, 0, &mut n_channels),
            NCCL_SUCCESS
        );
        assert_eq!(
            get(
                ctx,
                4,
                1024,
                1,
                table.as_mut_ptr().cast(),
                7,
                3,
                0,
                ptr::null_mut()
            ),
            NCCL_SUCCESS
        );
        assert_eq!(table, before);
        assert_eq!(
            api.v5.finalize.expect("finalize")(ptr::null_mut()),
            NCCL_SUCCESS
        );
        finalize(&api, ctx);
        // init with a null out-pointer does nothing (and does not crash).
        assert_eq!(
            (api.init_with_plan)(ptr::null_mut(), 2, 1, support::logger(), ptr::null(), 0, 1),
            NCCL_SUCCESS
        );
        // A null logger: nothing is logged, the plan still applies.
        let path = c_path(&write_plan("nolog", PLAN_2X1));
        let mut ctx: *mut c_void = ptr::null_mut();
        assert_eq!(
            (api.init_with_plan)(&mut ctx, 2, 1, None, path.as_ptr(), 0, 1),
            NCCL_SUCCESS
        );
        let mut table = before;
        coll_info(&api, ctx, 4, 1024, &mut table);
        assert_only_zeroed(&before, &table, idx(RING, LL));
        finalize(&api, ctx);
    }
    assert_eq!(n_channels, 0);
}

#[test]
fn v6_shares_v5_behaviour_and_leaves_chunk_size_alone() {
    let api = api();
    let path = c_path(&write_plan("v6", PLAN_2X1));
    assert!(
        std::env::var_os("PLANNER_TUNER_PLAN").is_none(),
        "unset PLANNER_TUNER_PLAN to run these tests (this binary never sets it)"
    );
    // The v6 init reads the environment (not set here): one WARN, inactive.
    let mut ctx: *mut c_void = ptr::null_mut();
    let mut constants = NcclTunerConstantsV5 {
        base_latencies: [[1.5; NUM_PROTOCOLS]; NUM_ALGORITHMS],
        hw_latencies: [[[2.5; NUM_PROTOCOLS]; NUM_ALGORITHMS]; NUM_HW_LINKS],
        ll_max_bws: [[3.5; 3]; 4],
        per_ch_max_ring_ll128_bws: [[4.5; 3]; 4],
        per_ch_max_tree_ll128_bws: [[5.5; 3]; 4],
        per_ch_max_tree_bws: [[6.5; 3]; 4],
        per_ch_max_nvls_tree_bws: [[7.5; 3]; 4],
    };
    let constants_before = constants;
    let mut nvl = NcclNvlDomainInfoV5 {
        n_nvl_domains: 1,
        min_ranks_per_nvl_domain: 2,
        max_ranks_per_nvl_domain: 2,
    };
    take_lines();
    // SAFETY: NCCL-shaped arguments: out-pointer, logger, live nvl and constants structs.
    let rc = unsafe {
        api.v6.init.expect("init")(
            &mut ctx,
            7,
            2,
            1,
            support::logger(),
            &mut nvl,
            &mut constants,
        )
    };
    assert_eq!(rc, NCCL_SUCCESS);
    assert_eq!(
        constants, constants_before,
        "the plugin writes none of NCCL's constants"
    );
    assert_eq!(take_lines().len(), 1);
    // SAFETY: context from init.
    assert_eq!(
        unsafe { api.v6.finalize.expect("finalize")(ctx) },
        NCCL_SUCCESS
    );

    let ctx = init_path(&api, 2, 1, Some(&path), 22803, 0);
    let get = api.v6.get_coll_info.expect("getCollInfo");
    let before = nccl_like_table();
    let mut table = before;
    let mut n_channels: c_int = 0;
    // SAFETY: as NCCL calls it.
    let rc = unsafe {
        get(
            ctx,
            4,
            200_000,
            1,
            table.as_mut_ptr().cast(),
            7,
            3,
            1,
            &mut n_channels,
        )
    };
    assert_eq!(rc, NCCL_SUCCESS);
    assert_only_zeroed(&before, &table, idx(TREE, SIMPLE));
    assert_eq!(n_channels, 4);
    let mut chunk: usize = 131072;
    let chunk_size = api.v6.get_chunk_size.expect("getChunkSize");
    for c in [ctx, ptr::null_mut()] {
        // SAFETY: a live out-value; the plugin leaves it alone.
        assert_eq!(
            unsafe { chunk_size(c, 4, 200_000, 0, 2, 4, &mut chunk) },
            NCCL_SUCCESS
        );
        assert_eq!(chunk, 131072);
    }
    // SAFETY: null chunk pointer is never dereferenced.
    assert_eq!(
        unsafe { chunk_size(ctx, 4, 200_000, 0, 2, 4, ptr::null_mut()) },
        NCCL_SUCCESS
    );
    finalize(&api, ctx);
}

#[test]
fn eight_threads_on_separate_and_shared_contexts() {
    let api = api();
    let path = c_path(&write_plan("threads", PLAN_2X1));
    const CALLS: usize = 20_000;
    let expected = |bytes: usize| match bytes {
        0..=65535 => (idx(RING, LL), 0),
        65536..=1048575 => (idx(TREE, SIMPLE), 4),
        _ => (idx(RING, SIMPLE), 0),
    };
    let check_calls = |ctx: *mut c_void, seed: usize| {
        let api = support::api();
        let before = nccl_like_table();
        let mut state = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for _ in 0..CALLS {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bytes = 1 + (state % (4 << 20)) as usize;
            let mut table = before;
            let n_channels = coll_info(&api, ctx, NCCL_FUNC_ALL_REDUCE, bytes, &mut table);
            let (entry, channels) = expected(bytes);
            assert_only_zeroed(&before, &table, entry);
            assert_eq!(n_channels, channels);
        }
        assert!(take_lines().is_empty(), "decision logging off in this test");
    };

    // Separate contexts: each thread makes, uses and finalizes its own (as one communicator per thread would).
    std::thread::scope(|s| {
        for t in 0..8 {
            let path = &path;
            s.spawn(move || {
                let api = support::api();
                for round in 0..4 {
                    let ctx = init_path(&api, 2, 1, Some(path), 22803, 0);
                    assert_eq!(take_lines().len(), 1);
                    check_calls(ctx, t * 10 + round);
                    finalize(&api, ctx);
                }
            });
        }
    });

    // One context shared by 8 threads.
    let shared = init_path(&api, 2, 1, Some(&path), 22803, 0) as usize;
    std::thread::scope(|s| {
        for t in 0..8 {
            s.spawn(move || check_calls(shared as *mut c_void, 100 + t));
        }
    });
    finalize(&api, shared as *mut c_void);
}
