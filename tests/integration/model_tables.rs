//! Tuning tables: the built-in files load, carry the constants verified
//! against NCCL's source, differ where NCCL changed, and a bad file is a
//! bad input naming the file and the key.

use planner::model::examples::h200x2_capture;
use planner::model::input::GraphInfo;
use planner::model::{table, Algo, Coll, Model, Proto, TuningTable};
use planner::nccl_env::NcclEnv;
use planner::topo::PathType;

const T228: &str = include_str!("../../tuning-tables/nccl-2.28.json");

#[test]
fn builtin_tables_load_with_nccl_values() {
    let t = table::builtin("2.28").unwrap();
    assert_eq!(t.family, "2.28");
    assert_eq!(t.base_latencies[Algo::Ring as usize], [6.6, 14.0, 8.4]);
    assert_eq!(t.hw_latencies[2][Algo::NvlsTree as usize], [0.0, 0.0, 20.9]);
    assert_eq!(t.ll_max_bws[2], [141.0, 45.0, 35.0]);
    assert_eq!(t.tree_correction_factor[Proto::Ll as usize].len(), 23);
    assert_eq!(t.max_dev_work_batch_colls, 10);
    let n = table::builtin("2.30").unwrap();
    assert_eq!(n.tree_correction_factor[Proto::Simple as usize].len(), 24);
    assert_eq!(n.per_channel_max_ring_ll128_bws[3], [40.0, 40.0, 40.0]);
    assert_eq!(t.per_channel_max_ring_ll128_bws[3], [73.4, 34.6, 73.4]);
    assert_eq!(n.per_channel_max_nvls_tree_bws[3][2], 80.0);
    assert_eq!(n.scheduler.min_traffic_per_channel, 32768);
    assert_eq!(table::families().len(), 14, "2.18 ... 2.31 (pre-release)");
}

#[test]
fn versions_map_to_families() {
    assert_eq!(table::family_of("2.28.9").unwrap(), "2.28");
    assert_eq!(table::family_of("v2.30.7-1").unwrap(), "2.30");
    assert_eq!(table::family_of("2.28.9+cuda13.0").unwrap(), "2.28");
    assert!(table::family_of("two").is_err());
    assert_eq!(table::nearest_family(2, 28), ("2.28", true));
    assert_eq!(table::nearest_family(2, 29), ("2.29", true));
    // 2.31 is a (pre-release) family; 2.32 is newer than every family.
    assert_eq!(table::nearest_family(2, 31), ("2.31", true));
    assert_eq!(table::nearest_family(2, 32), ("2.31", false));
    assert_eq!(table::nearest_family(2, 17), ("2.18", false));
    let err = table::builtin("2.17").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("2.28, 2.29, 2.30"), "{err}");
}

#[test]
fn blackwell_ring_ll128_cap_changed_in_2_30() {
    // A Blackwell capture-like input: 12 ring channels at 60 GB/s.
    let mut input = h200x2_capture();
    input.min_sm = 100;
    input.max_sm = 100;
    input.ring = GraphInfo {
        bw_intra: 60.0,
        bw_inter: 60.0,
        type_intra: PathType::Nvl,
        ..input.ring.clone()
    };
    let bw = |fam: &str| {
        let m = Model::new(
            input.clone(),
            NcclEnv::default(),
            table::builtin(fam).unwrap(),
        )
        .unwrap();
        m.tuned.bandwidth[Coll::AllReduce as usize][Algo::Ring as usize][Proto::Ll128 as usize]
    };
    // 2.28: min(720*0.92 = 662.4, 12*73.4 = 880.8) = 662.4; ratio 2/2 = 1.
    assert!((bw("2.28") - 662.4).abs() < 1e-3);
    // 2.30: min(662.4, 12*40 = 480) = 480.
    assert!((bw("2.30") - 480.0).abs() < 1e-3);
}

#[test]
fn missing_and_negative_constants_are_bad_input() {
    let missing = T228.replace("\"pat_bw\": 0.75,", "");
    let err = TuningTable::parse(&missing, "my.json").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert_eq!(
        err.to_string(),
        "my.json: missing constant 'factors.pat_bw'"
    );

    let negative = T228.replace("\"Ring\": [6.6, 14.0, 8.4]", "\"Ring\": [6.6, -14.0, 8.4]");
    let err = TuningTable::parse(&negative, "my.json").unwrap_err();
    assert_eq!(
        err.to_string(),
        "my.json: 'base_latencies.Ring[1]' = -14 is negative"
    );

    let short = T228.replace(
        "\"Hopper\": [141.0, 45.0, 35.0]",
        "\"Hopper\": [141.0, 45.0]",
    );
    let err = TuningTable::parse(&short, "my.json").unwrap_err();
    assert_eq!(
        err.to_string(),
        "my.json: 'll_max_bws.Hopper' must have 3 values, found 2"
    );

    let text = T228.replace("\"warp_size\": 32", "\"warp_size\": \"32\"");
    let err = TuningTable::parse(&text, "my.json").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("my.json: 'threads.warp_size' must be a number"),
        "{err}"
    );

    let err = TuningTable::parse("{ \"family\": ", "cut.json").unwrap_err();
    assert!(err.to_string().starts_with("cut.json:1:"), "{err}");
    assert!(err.to_string().contains("not valid JSON"), "{err}");

    let err = TuningTable::load_file("/nonexistent/t.json").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .starts_with("/nonexistent/t.json: cannot read"),
        "{err}"
    );
}
