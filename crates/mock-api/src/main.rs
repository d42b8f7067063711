//! `ralph-mock-api --scenario FILE [--log FILE] [--port N]`: serves the scenario on 127.0.0.1
//! until killed. The first line on stdout is the base URL (`http://127.0.0.1:PORT`): Claude
//! Code's `ANTHROPIC_BASE_URL` and Gemini CLI's `GOOGLE_GEMINI_BASE_URL` as it is, opencode's
//! and Codex's provider `baseURL` with `/v1` added.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use ralph_mock_api::{Scenario, Server};

const USAGE: &str = "usage: ralph-mock-api --scenario FILE [--log FILE] [--port N]";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ralph-mock-api: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let mut scenario = None;
    let mut log = None;
    let mut port = 0u16;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--scenario" => scenario = Some(PathBuf::from(value()?)),
            "--log" => log = Some(PathBuf::from(value()?)),
            "--port" => {
                let v = value()?;
                port = v
                    .parse()
                    .map_err(|_| format!("--port {v}: not a port number"))?;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let path = scenario.ok_or_else(|| format!("--scenario is required\n{USAGE}"))?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let scenario = Scenario::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let server = Server::start(scenario, log, port).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout();
    writeln!(out, "{}", server.url())
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())?;
    loop {
        std::thread::park();
    }
}
