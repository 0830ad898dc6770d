//! The launcher rendezvous between two real processes: rank 0 hands an id to
//! rank 1 over TCP (`planner __rendezvous-check` under torchrun-style
//! variables), and a rank that never joins is named in the timeout.

use std::process::{Command, Output, Stdio};

fn free_port() -> u16 {
    planner::verify::rendezvous::free_port().unwrap()
}

fn rank(rank: usize, world: usize, port: u16, timeout: u64) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("planner"));
    cmd.args(["__rendezvous-check", "--timeout", &timeout.to_string()])
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn two_processes_exchange_an_id() {
    let port = free_port();
    // rank 1 first: it must wait for rank 0 to listen
    let one = rank(1, 2, port, 30).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let zero = rank(0, 2, port, 30).spawn().unwrap();
    let zero = zero.wait_with_output().unwrap();
    let one = one.wait_with_output().unwrap();
    assert!(zero.status.success(), "{}", text(&zero));
    assert!(one.status.success(), "{}", text(&one));
    let id_of = |out: &Output| {
        let t = String::from_utf8_lossy(&out.stdout).into_owned();
        t.lines()
            .find_map(|l| l.split(" got id ").nth(1).map(|s| s.trim().to_string()))
            .unwrap_or_else(|| panic!("no id in {t}"))
    };
    let (a, b) = (id_of(&zero), id_of(&one));
    assert_eq!(a.len(), 256, "{a}");
    assert_eq!(a, b);
    assert!(text(&zero).contains("2 ranks joined"), "{}", text(&zero));
    assert!(text(&zero).contains("ids agree: true"));
}

#[test]
fn a_rank_that_never_joins_is_named() {
    let port = free_port();
    let out = rank(0, 3, port, 1).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("ranks 1, 2 of 3 never joined"), "{t}");
}

#[test]
fn bad_launcher_variables_exit_2() {
    let out = Command::new(assert_cmd::cargo::cargo_bin!("planner"))
        .args(["__rendezvous-check"])
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env_remove("MASTER_ADDR")
        .env("MASTER_PORT", "1234")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("MASTER_ADDR is not set"),
        "{}",
        text(&out)
    );
}
