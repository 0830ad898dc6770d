//! Multi-process runs under the usual launchers: which rank this process is
//! (from torchrun's, Open MPI's, MPICH's or Slurm's variables) and a small TCP
//! rendezvous at `MASTER_ADDR:MASTER_PORT` through which rank 0 hands out
//! NCCL unique ids and collects the other ranks' outcomes.
//!
//! Wire format: every message is a 4-byte big-endian length and that many
//! bytes (JSON for the handshake). Rank 0 listens; every other rank connects,
//! says hello (rank, world size, host), and waits for the welcome that rank 0
//! sends once everyone is in. If the deadline passes first, rank 0 names the
//! missing ranks, tells the ranks that did join, and fails.

use crate::error::{Error, Result};
pub(crate) use crate::measure::hostname;
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// This process's place in a multi-process run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LauncherEnv {
    pub(crate) rank: usize,
    pub(crate) world_size: usize,
    /// GPU of this process on its node; None when the launcher did not say.
    pub(crate) local_rank: Option<usize>,
    pub(crate) master_addr: String,
    pub(crate) master_port: u16,
    /// Which variables these came from ("RANK/WORLD_SIZE", "OMPI_COMM_WORLD_*", ...).
    pub(crate) source: String,
}

/// The launchers' variable names: (rank, world size, local rank, label).
const LAUNCHERS: [(&str, &str, &str, &str); 4] = [
    (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "RANK/WORLD_SIZE (torchrun)",
    ),
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_* (Open MPI)",
    ),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_* (MPICH)"),
    (
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_LOCALID",
        "SLURM_* (srun)",
    ),
];

impl LauncherEnv {
    /// From this process's environment.
    pub(crate) fn from_env() -> Result<Option<LauncherEnv>> {
        LauncherEnv::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any variable lookup. None when no launcher variables are set or
    /// the world has one rank (then this is an ordinary single-process run).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<LauncherEnv>> {
        let Some((rank_var, world_var, local_var, label)) = LAUNCHERS
            .into_iter()
            .find(|(rank, world, _, _)| get(rank).is_some() && get(world).is_some())
        else {
            return Ok(None);
        };
        let number = |var: &str| -> Result<Option<usize>> {
            match get(var) {
                None => Ok(None),
                Some(text) => text.trim().parse::<usize>().map(Some).map_err(|_| {
                    Error::bad_input(format!(
                        "invalid {var}={text:?}: expected a non-negative integer"
                    ))
                }),
            }
        };
        let rank = number(rank_var)?.unwrap_or(0);
        let world_size = number(world_var)?.unwrap_or(1);
        if world_size == 0 || rank >= world_size {
            return Err(Error::bad_input(format!(
                "invalid {rank_var}={rank} with {world_var}={world_size}: the rank must be below the world size"
            )));
        }
        if world_size == 1 {
            return Ok(None);
        }
        let local_rank = number(local_var)?;
        let master_addr = get("MASTER_ADDR").filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            Error::bad_input(format!(
                "MASTER_ADDR is not set: rank {rank} of {world_size} (from {label}) needs rank 0's host name or address"
            ))
        })?;
        let port_text = get("MASTER_PORT").ok_or_else(|| {
            Error::bad_input(format!(
                "MASTER_PORT is not set: rank {rank} of {world_size} (from {label}) needs the rendezvous port"
            ))
        })?;
        let master_port = port_text
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "invalid MASTER_PORT={port_text:?}: expected a port number 1-65535"
                ))
            })?;
        Ok(Some(LauncherEnv {
            rank,
            world_size,
            local_rank,
            master_addr: master_addr.trim().to_string(),
            master_port,
            source: label.to_string(),
        }))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    rank: usize,
    world_size: usize,
    host: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Verdict {
    Welcome { hosts: Vec<String> },
    Abort { reason: String },
}

/// A joined rendezvous: rank 0 holds a connection to every other rank, the
/// others one connection to rank 0.
#[derive(Debug)]
pub struct Rendezvous {
    pub rank: usize,
    /// Host of every rank, by rank.
    pub(crate) hosts: Vec<String>,
    /// Rank 0: connections to ranks 1..world (index rank - 1).
    peers: Vec<TcpStream>,
    /// Other ranks: the connection to rank 0.
    root: Option<TcpStream>,
}

/// Messages larger than this are refused (a corrupt length, not a real message).
const MAX_MESSAGE: usize = 64 << 20;

fn write_message(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(&(bytes.len() as u32).to_be_bytes())?;
    stream.write_all(bytes)?;
    stream.flush()
}

fn read_message(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_MESSAGE {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            format!("message of {len} bytes"),
        ));
    }
    let mut buf = vec![0u8; len];
    stream.read_exact(&mut buf)?;
    Ok(buf)
}

fn list(ranks: &[usize]) -> String {
    ranks
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Rendezvous {
    /// Join the rendezvous, waiting at most `timeout` for everyone.
    pub(crate) fn join(env: &LauncherEnv, timeout: Duration) -> Result<Rendezvous> {
        if env.rank == 0 {
            Rendezvous::host(env, timeout)
        } else {
            Rendezvous::connect(env, timeout)
        }
    }

    fn host(env: &LauncherEnv, timeout: Duration) -> Result<Rendezvous> {
        let where_ = format!("rendezvous on port {}", env.master_port);
        // Every interface: MASTER_ADDR names this host as the others see it.
        let listener = TcpListener::bind(("0.0.0.0", env.master_port))
            .map_err(|e| Error::runtime(format!("{where_}: cannot listen: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::runtime(format!("{where_}: {e}")))?;
        let deadline = Instant::now() + timeout;
        let mut joined: Vec<Option<(TcpStream, String)>> =
            (0..env.world_size).map(|_| None).collect();
        let mut waiting = env.world_size - 1;
        while waiting > 0 {
            match listener.accept() {
                Ok((mut stream, from)) => {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let hello = read_message(&mut stream)
                        .ok()
                        .and_then(|b| serde_json::from_slice::<Hello>(&b).ok());
                    let Some(hello) = hello else {
                        eprintln!("planner: {where_}: ignoring a connection from {from} that did not say hello");
                        continue;
                    };
                    let refuse = if hello.world_size != env.world_size {
                        Some(format!(
                            "rank {} at {from} says the world has {} ranks, rank 0 says {}",
                            hello.rank, hello.world_size, env.world_size
                        ))
                    } else if hello.rank == 0 || hello.rank >= env.world_size {
                        Some(format!(
                            "rank {} at {from} is not a valid peer rank",
                            hello.rank
                        ))
                    } else if joined[hello.rank].is_some() {
                        Some(format!(
                            "rank {} joined twice (again from {from})",
                            hello.rank
                        ))
                    } else {
                        None
                    };
                    if let Some(reason) = refuse {
                        let verdict = Verdict::Abort {
                            reason: reason.clone(),
                        };
                        let _ = write_message(
                            &mut stream,
                            &serde_json::to_vec(&verdict).unwrap_or_default(),
                        );
                        let mut others: Vec<TcpStream> = joined
                            .iter_mut()
                            .filter_map(|s| s.take().map(|s| s.0))
                            .collect();
                        abort_all(&mut others, &reason);
                        return Err(Error::runtime(format!("{where_}: {reason}")));
                    }
                    let _ = stream.set_read_timeout(None);
                    joined[hello.rank] = Some((stream, hello.host));
                    waiting -= 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<usize> = (1..env.world_size)
                            .filter(|r| joined[*r].is_none())
                            .collect();
                        let present: Vec<usize> = (0..env.world_size)
                            .filter(|r| *r == 0 || joined[*r].is_some())
                            .collect();
                        let reason = format!(
                            "timed out after {} s: rank{} {} of {} never joined (joined: {})",
                            timeout.as_secs(),
                            if missing.len() == 1 { "" } else { "s" },
                            list(&missing),
                            env.world_size,
                            list(&present)
                        );
                        let mut others: Vec<TcpStream> = joined
                            .iter_mut()
                            .filter_map(|s| s.take().map(|s| s.0))
                            .collect();
                        abort_all(&mut others, &reason);
                        return Err(Error::runtime(format!("{where_}: {reason}")));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(Error::runtime(format!("{where_}: accept failed: {e}"))),
            }
        }
        let mut hosts = vec![hostname()];
        let mut peers = Vec::new();
        for slot in joined.into_iter().skip(1) {
            let (stream, host) =
                slot.ok_or_else(|| Error::runtime(format!("{where_}: lost a peer")))?;
            hosts.push(host);
            peers.push(stream);
        }
        let welcome = serde_json::to_vec(&Verdict::Welcome {
            hosts: hosts.clone(),
        })
        .map_err(|e| Error::runtime(format!("{where_}: {e}")))?;
        for (i, peer) in peers.iter_mut().enumerate() {
            write_message(peer, &welcome)
                .map_err(|e| Error::runtime(format!("{where_}: rank {} went away: {e}", i + 1)))?;
        }
        Ok(Rendezvous {
            rank: 0,
            hosts,
            peers,
            root: None,
        })
    }

    fn connect(env: &LauncherEnv, timeout: Duration) -> Result<Rendezvous> {
        let target = format!("{}:{}", env.master_addr, env.master_port);
        let where_ = format!(
            "rank {} of {}: rendezvous at {target}",
            env.rank, env.world_size
        );
        let deadline = Instant::now() + timeout;
        let mut last_error = String::from("no address");
        // Rank 0 may not listen yet: retry until the deadline.
        let mut stream = loop {
            let addrs: Vec<SocketAddr> = match target.to_socket_addrs() {
                Ok(a) => a.collect(),
                Err(e) => {
                    last_error = format!("cannot resolve: {e}");
                    Vec::new()
                }
            };
            let mut connected = None;
            for addr in &addrs {
                match TcpStream::connect_timeout(addr, Duration::from_secs(2)) {
                    Ok(s) => {
                        connected = Some(s);
                        break;
                    }
                    Err(e) => last_error = e.to_string(),
                }
            }
            if let Some(s) = connected {
                break s;
            }
            if Instant::now() >= deadline {
                return Err(Error::runtime(format!(
                    "{where_}: could not reach rank 0 within {} s ({last_error})",
                    timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let hello = serde_json::to_vec(&Hello {
            rank: env.rank,
            world_size: env.world_size,
            host: hostname(),
        })
        .map_err(|e| Error::runtime(format!("{where_}: {e}")))?;
        write_message(&mut stream, &hello)
            .map_err(|e| Error::runtime(format!("{where_}: cannot say hello: {e}")))?;
        // Rank 0 answers once everyone is in, or at its own deadline; allow a
        // little beyond ours for the two clocks.
        let remaining = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(5);
        let _ = stream.set_read_timeout(Some(remaining));
        let verdict = read_message(&mut stream).map_err(|e| {
            Error::runtime(format!(
                "{where_}: connected, but the rendezvous did not complete within {} s (other ranks missing?): {e}",
                timeout.as_secs()
            ))
        })?;
        let verdict: Verdict = serde_json::from_slice(&verdict)
            .map_err(|e| Error::runtime(format!("{where_}: bad answer from rank 0: {e}")))?;
        let _ = stream.set_read_timeout(None);
        match verdict {
            Verdict::Welcome { hosts } => Ok(Rendezvous {
                rank: env.rank,
                hosts,
                peers: Vec::new(),
                root: Some(stream),
            }),
            Verdict::Abort { reason } => Err(Error::runtime(format!(
                "{where_}: rank 0 gave up: {reason}"
            ))),
        }
    }

    /// Rank 0 sends `message` to everyone; every rank returns it.
    pub(crate) fn broadcast(&mut self, message: Option<&[u8]>) -> Result<Vec<u8>> {
        if self.rank == 0 {
            let message = message
                .ok_or_else(|| Error::runtime("rendezvous: rank 0 has nothing to broadcast"))?;
            for (i, peer) in self.peers.iter_mut().enumerate() {
                write_message(peer, message).map_err(|e| {
                    Error::runtime(format!("rendezvous: rank {} went away: {e}", i + 1))
                })?;
            }
            Ok(message.to_vec())
        } else {
            let root = self
                .root
                .as_mut()
                .ok_or_else(|| Error::runtime("rendezvous: not connected"))?;
            read_message(root).map_err(|e| {
                Error::runtime(format!("rendezvous: rank {}: lost rank 0: {e}", self.rank))
            })
        }
    }

    /// Every rank sends `message`; rank 0 gets all of them by rank, the others None.
    pub(crate) fn gather(&mut self, message: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        if self.rank == 0 {
            let mut all = vec![message.to_vec()];
            for (i, peer) in self.peers.iter_mut().enumerate() {
                let got = read_message(peer).map_err(|e| {
                    Error::runtime(format!("rendezvous: rank {} went away: {e}", i + 1))
                })?;
                all.push(got);
            }
            Ok(Some(all))
        } else {
            let root = self
                .root
                .as_mut()
                .ok_or_else(|| Error::runtime("rendezvous: not connected"))?;
            write_message(root, message).map_err(|e| {
                Error::runtime(format!("rendezvous: rank {}: lost rank 0: {e}", self.rank))
            })?;
            Ok(None)
        }
    }
}

fn abort_all(peers: &mut [TcpStream], reason: &str) {
    let verdict = Verdict::Abort {
        reason: reason.to_string(),
    };
    let bytes = serde_json::to_vec(&verdict).unwrap_or_default();
    for peer in peers {
        let _ = write_message(peer, &bytes);
    }
}

/// A port that was free a moment ago (for tests and local launches); never
/// the same one twice in one process, so concurrent callers do not collide.
pub fn free_port() -> Result<u16> {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    for _ in 0..100 {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .map_err(|e| Error::runtime(format!("cannot find a free port: {e}")))?;
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .map_err(|e| Error::runtime(format!("cannot find a free port: {e}")))?;
        let mut used = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if !used.contains(&port) {
            used.push(port);
            return Ok(port);
        }
    }
    Err(Error::runtime("cannot find a free port"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn launcher_variables() {
        assert_eq!(LauncherEnv::from_lookup(lookup(&[])).unwrap(), None);
        let torchrun = LauncherEnv::from_lookup(lookup(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (torchrun.rank, torchrun.world_size, torchrun.local_rank),
            (1, 2, Some(1))
        );
        assert_eq!(
            (torchrun.master_addr.as_str(), torchrun.master_port),
            ("node0", 29500)
        );

        let slurm = LauncherEnv::from_lookup(lookup(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "3"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "1234"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (slurm.rank, slurm.world_size, slurm.local_rank),
            (3, 8, Some(3))
        );
        assert!(slurm.source.contains("srun"));

        // one rank: an ordinary run
        assert_eq!(
            LauncherEnv::from_lookup(lookup(&[("RANK", "0"), ("WORLD_SIZE", "1")])).unwrap(),
            None
        );
    }

    #[test]
    fn bad_launcher_variables_name_the_variable() {
        let cases: [(&[(&str, &str)], &str); 5] = [
            (&[("RANK", "x"), ("WORLD_SIZE", "2")], "RANK=\"x\""),
            (
                &[("RANK", "2"), ("WORLD_SIZE", "2")],
                "below the world size",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")],
                "MASTER_ADDR",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")],
                "MASTER_PORT is not set",
            ),
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "70000"),
                ],
                "MASTER_PORT=\"70000\"",
            ),
        ];
        for (vars, expected) in cases {
            let e = LauncherEnv::from_lookup(lookup(vars)).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(expected), "{e} lacks {expected}");
        }
    }

    fn env(rank: usize, world: usize, port: u16) -> LauncherEnv {
        LauncherEnv {
            rank,
            world_size: world,
            local_rank: Some(rank),
            master_addr: "127.0.0.1".into(),
            master_port: port,
            source: "test".into(),
        }
    }

    #[test]
    fn three_ranks_join_broadcast_and_gather() {
        let port = free_port().unwrap();
        let peers: Vec<_> = (1..3)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut rv =
                        Rendezvous::join(&env(rank, 3, port), Duration::from_secs(20)).unwrap();
                    let got = rv.broadcast(None).unwrap();
                    assert!(rv
                        .gather(format!("from {rank}").as_bytes())
                        .unwrap()
                        .is_none());
                    got
                })
            })
            .collect();
        let mut root = Rendezvous::join(&env(0, 3, port), Duration::from_secs(20)).unwrap();
        assert_eq!(root.hosts.len(), 3);
        root.broadcast(Some(b"the id")).unwrap();
        let all = root.gather(b"from 0").unwrap().unwrap();
        assert_eq!(
            all,
            vec![b"from 0".to_vec(), b"from 1".to_vec(), b"from 2".to_vec()]
        );
        for p in peers {
            assert_eq!(p.join().unwrap(), b"the id".to_vec());
        }
    }

    #[test]
    fn missing_ranks_are_named() {
        let port = free_port().unwrap();
        let joiner =
            std::thread::spawn(move || Rendezvous::join(&env(2, 4, port), Duration::from_secs(2)));
        let err = Rendezvous::join(&env(0, 4, port), Duration::from_secs(1)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("ranks 1, 3 of 4 never joined"), "{text}");
        assert!(text.contains("joined: 0, 2"), "{text}");
        // the rank that did join hears why
        let peer_err = joiner.join().unwrap().unwrap_err().to_string();
        assert!(peer_err.contains("ranks 1, 3"), "{peer_err}");
    }

    #[test]
    fn unreachable_rank_zero_times_out() {
        let port = free_port().unwrap();
        let err = Rendezvous::join(&env(1, 2, port), Duration::from_millis(300)).unwrap_err();
        assert!(err.to_string().contains("could not reach rank 0"), "{err}");
    }
}
