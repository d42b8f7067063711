//! The server: accepts connections on 127.0.0.1, answers each request from the scenario, and
//! appends every request to the JSONL log.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::api::{Api, Response};
use crate::http::{self, Request};
use crate::reply::Turn;
use crate::scenario::{Block, Reply, Scenario};

/// A running mock. It serves until the process exits.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
}

/// What connections share: the scenario, how often each rule answered, the request counter
/// and the log. Requests are answered one at a time, so the counter and the log agree.
#[derive(Debug)]
struct State {
    scenario: Scenario,
    uses: Vec<usize>,
    /// Model calls so far, whatever the API.
    requests: usize,
    /// Every request so far.
    seq: usize,
    log: Option<File>,
}

impl Server {
    /// Starts serving `scenario` on `127.0.0.1:port` (0 picks a free port), logging every
    /// request to `log` when given (the file is created or truncated).
    pub fn start(scenario: Scenario, log: Option<PathBuf>, port: u16) -> io::Result<Server> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let addr = listener.local_addr()?;
        let log = match log {
            Some(path) => Some(
                File::create(&path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
            ),
            None => None,
        };
        let state = Arc::new(Mutex::new(State {
            uses: vec![0; scenario.rules.len()],
            scenario,
            requests: 0,
            seq: 0,
            log,
        }));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let state = Arc::clone(&state);
                std::thread::spawn(move || {
                    // A client hanging up mid-request is its business.
                    let _ = serve(conn, &state);
                });
            }
        });
        Ok(Server { addr })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn serve(conn: TcpStream, state: &Mutex<State>) -> io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut writer = conn;
    while let Some(req) = http::read_request(&mut reader)? {
        let (status, content_type, body) = {
            let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
            st.answer(&req)
        };
        http::write_response(
            &mut writer,
            status,
            content_type,
            body.as_bytes(),
            req.method == "HEAD",
        )?;
        if req.wants_close() {
            break;
        }
    }
    Ok(())
}

impl State {
    /// The response to `req`, logging it.
    fn answer(&mut self, req: &Request) -> (u16, &'static str, String) {
        let seq = self.seq;
        self.seq += 1;
        let mut entry = json!({
            "seq": seq,
            "time_ms": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            "method": req.method,
            "target": req.target,
        });
        let (status, content_type, body) = if let Some(api) = Api::route(&req.method, req.path()) {
            self.model_call(api, req, &mut entry)
        } else if req.method == "HEAD" || (req.method == "GET" && req.path() == "/") {
            (200, "text/plain", String::new())
        } else {
            let e = json!({"type": "error", "error": {"type": "not_found_error",
                "message": format!("ralph-mock-api does not serve {} {}", req.method, req.path())}});
            (404, "application/json", e.to_string())
        };
        entry["status"] = status.into();
        if let Some(log) = &mut self.log {
            // Tests read the log while the mock runs: each line goes out in one write.
            let mut line = entry.to_string();
            line.push('\n');
            let _ = log.write_all(line.as_bytes());
        }
        (status, content_type, body)
    }

    /// A model call: pick the rule, build the reply in the call's API.
    fn model_call(&mut self, api: Api, req: &Request, entry: &mut Value) -> Response {
        let n = self.requests;
        self.requests += 1;
        entry["request"] = n.into();
        entry["api"] = api.name().into();
        let body: Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => {
                entry["body_error"] = e.to_string().into();
                return api.bad_json(&e.to_string());
            }
        };
        let digest = api.digest(&body);
        let cwd = api.working_dir(&body).unwrap_or_default();
        let rule = self.scenario.pick(n, &digest, &self.uses);
        entry["rule"] = rule.into();
        entry["working_dir"] = cwd.clone().into();
        entry["last_user"] = digest.into();
        let stream = api.streams(req.path(), &body);
        let model = api.model(req.path(), &body);
        let input_tokens = (req.body.len() / 4) as u64;
        entry["body"] = body;
        let blocks = match rule {
            Some(i) => {
                self.uses[i] += 1;
                match &self.scenario.rules[i].reply {
                    Reply::Error(e) => return api.error(e),
                    Reply::Content(blocks) => blocks.clone(),
                }
            }
            None => vec![Block::Text(format!(
                "ralph-mock-api: no scenario rule matches request {n}."
            ))],
        };
        api.turn(&Turn::new(n, &model, input_tokens, &blocks, &cwd), stream)
    }
}
