//! The HTTP side of the broker: routes as plain functions over [`App`], limits and security
//! headers as layers.
//!
//! | route | what |
//! |---|---|
//! | `GET /a/TOKEN` | the question an answer link opens; 410 and how it closed for a few minutes after it closed ([`loops::CLOSED_TOLD_FOR`]), then 404 like any unknown link |
//! | `POST /a/TOKEN` | answers it: JSON `{"answer": "text"}`, `{"option": 2}`, `{"options": [1, 3], "answer": "note"}`, or the page's form; `{"action": "skip"}` or `{"action": "extend"}` (five more minutes; Telegram's button adds an hour) |
//! | `GET /a/TOKEN/events` | server-sent events: `closed` (with how), `changed` (JSON: `left_ms`, `timed_out`, `live`: whether the loop that asked still runs) |
//! | `GET /` , `GET /events` | the dashboard of every loop, for a paired device, and its stream: `loops` (the list, as HTML) at once and on every change, new loops and questions included |
//! | `POST /stop` | stops a loop (form or JSON `root`: its directory), for a paired device, as `ralph stop` does |
//! | `GET /pair/CODE` | pairs this browser (sets the device cookie) |
//! | `GET /assets/page.js`, `/assets/page.css` | the page's script and style, from the binary |
//!
//! Every response carries a strict Content-Security-Policy (scripts and styles from this origin
//! only, nothing inline, nothing from elsewhere), `Referrer-Policy: no-referrer` (an answer link
//! is a secret and must not leak in a `Referer`), `X-Content-Type-Options: nosniff`,
//! `X-Frame-Options: DENY` and `Cache-Control: no-store`. Request bodies are capped at
//! [`MAX_BODY_BYTES`]; a request gets [`REQUEST_TIMEOUT`] to be answered (streams of events
//! excepted once they started). A POST whose `Origin` (or `Sec-Fetch-Site`) says it comes from
//! another site is refused: another page cannot answer for you even if it knows a link.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::Stream;
use serde::Deserialize;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;

use crate::devices;
use crate::loops::{self, Receipt, Sender};
use crate::page;
use crate::streams;
use ralph_fleet::rows::{Collector, LoopRow};
use ralph_protocol::{Channel, QuestionId, Reply, StopBy, mint_link, verify_link};

/// The largest request body taken, in bytes: an answer's cap plus room for its encoding.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// How long a request may take before it is answered with 408.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const PAGE_JS: &[u8] = include_bytes!("../assets/page.js");
const PAGE_CSS: &[u8] = include_bytes!("../assets/page.css");

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct App {
    /// ralph's state directory (links, devices, pairing codes).
    pub state_dir: PathBuf,
    /// Whether the broker is reached over https (the device cookie is then `Secure`).
    pub https: bool,
    /// Failed pairing attempts, for the rate limit.
    pub pairing: devices::Attempts,
    /// The origin (`https://box.tailnet.ts.net`) of `--public-url`, when a proxy in front of
    /// the broker may pass on another `Host` than the one the browser used.
    pub public_origin: Option<String>,
    /// The event streams of open pages, and their one watch of the loops.
    pub streams: streams::Streams,
}

/// The broker's routes and layers over `app`.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/events", get(dashboard_events))
        .route("/a/{token}", get(question_page).post(answer))
        .route("/a/{token}/events", get(question_events))
        .route("/stop", axum::routing::post(stop))
        .route("/pair/{code}", get(pair))
        .route("/assets/page.js", get(js))
        .route("/assets/page.css", get(css))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            known_host,
        ))
        .with_state(app)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .layer(header_layer(header::CONTENT_SECURITY_POLICY, CSP))
        .layer(header_layer(header::REFERRER_POLICY, "no-referrer"))
        .layer(header_layer(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(header_layer(header::X_FRAME_OPTIONS, "DENY"))
        .layer(header_layer(header::CACHE_CONTROL, "no-store"))
}

/// Refuses a request whose `Host` is not one the broker answers to: an IP address (what a
/// page cannot be made to come from by DNS), `localhost`, or the host of `--public-url`. A page
/// of `http://evil.example:7707` whose name was re-pointed at 127.0.0.1 (DNS rebinding) is
/// thus never served, and its `Origin` never matches.
async fn known_host(
    State(app): State<Arc<App>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if host.is_some_and(|h| host_allowed(h, app.public_origin.as_deref())) {
        return next.run(req).await;
    }
    (
        StatusCode::MISDIRECTED_REQUEST,
        Html(page::message(
            "Unknown host",
            "This broker answers to its own address only. Reaching it through a proxy under another name? Start it with --public-url set to that address.",
        )),
    )
        .into_response()
}

/// Whether `host` (a `Host` header: `name[:port]`, `[v6][:port]`) names this broker.
fn host_allowed(host: &str, public_origin: Option<&str>) -> bool {
    let name = |authority: &str| -> String {
        let name = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => authority.rsplit_once(':').map_or(authority, |(n, _)| n),
        };
        name.to_ascii_lowercase()
    };
    let asked = name(host);
    asked.parse::<std::net::IpAddr>().is_ok()
        || asked == "localhost"
        || public_origin
            .and_then(|o| o.split_once("://"))
            .is_some_and(|(_, authority)| name(authority) == asked)
}

fn header_layer(
    name: header::HeaderName,
    value: &'static str,
) -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        PAGE_JS,
    )
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        PAGE_CSS,
    )
}

/// The one answer for every path, token or code that is not (or no longer) valid.
async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Html(page::not_found())).into_response()
}

/// Runs `f` (file I/O in the state directory or a loop's `.ralph/`) off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Option<T> + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok().flatten()
}

async fn question_page(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let dir = app.state_dir.clone();
    let link = format!("/a/{token}");
    // A link whose question closed a moment ago (answered in the terminal, say) says how, as
    // its POST does; later, and for every wrong token, the one page for nothing.
    let found = blocking(move || {
        let record = verify_link(&dir, &token)?;
        Some(match loops::pending(&record) {
            Some(q) => Ok(q),
            None if loops::closed_long_ago(&record, SystemTime::now()) => return None,
            None => Err(loops::closed_how(&record)),
        })
    });
    match found.await {
        Some(Ok(q)) => Html(page::question(&q, &link, SystemTime::now())).into_response(),
        Some(Err(how)) => (StatusCode::GONE, Html(page::closed(&how))).into_response(),
        None => not_found().await,
    }
}

/// A POST body: the page's script sends JSON; without script, the form sends `option` (once
/// per pick) and `answer`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    #[serde(default)]
    answer: Option<String>,
    #[serde(default)]
    option: Option<usize>,
    #[serde(default)]
    options: Vec<usize>,
    /// `skip` or `extend` instead of an answer.
    #[serde(default)]
    action: Option<String>,
}

impl AnswerBody {
    fn from_form(body: &[u8]) -> AnswerBody {
        let mut out = AnswerBody::default();
        for (k, v) in form_urlencoded::parse(body) {
            match &*k {
                "answer" => out.answer = Some(v.into_owned()),
                "action" => out.action = Some(v.into_owned()),
                "option" => match v.parse() {
                    Ok(n) => out.options.push(n),
                    // Out of range on purpose: the reply then says which numbers exist.
                    Err(_) => out.options.push(0),
                },
                _ => {}
            }
        }
        out
    }

    fn reply(self) -> Reply {
        let mut picked = self.options;
        picked.extend(self.option);
        let note = self.answer.unwrap_or_default();
        match picked.is_empty() {
            true => Reply::Text(note),
            false => Reply::Picks(picked, note),
        }
    }
}

/// Whether a state-changing request comes from a page of another site: its browser says so
/// (`Sec-Fetch-Site`, which no page can set), or, from a client that does not say, its
/// `Origin` is neither the `Host` it was sent to nor the broker's public origin.
fn foreign(headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    // A form posted from the broker's own page carries `Origin: null` (its referrer policy is
    // no-referrer, so the browser keeps even the origin back): the browser's word decides.
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some("same-origin") => return false,
        Some(_) => return true,
        None => {}
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        // Not a browser's cross-site request: browsers send Origin with every POST.
        return false;
    };
    if public_origin.is_some_and(|p| origin.as_bytes().eq_ignore_ascii_case(p.as_bytes())) {
        return false;
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest);
    match (origin_host, host) {
        (Some(o), Some(h)) => !o.eq_ignore_ascii_case(h),
        _ => true,
    }
}

async fn answer(
    State(app): State<Arc<App>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if foreign(&headers, app.public_origin.as_deref()) {
        return reply(
            StatusCode::FORBIDDEN,
            "foreign_origin",
            "Refused: this answer was sent from another site's page.",
            &headers,
        );
    }
    let dir = app.state_dir.clone();
    let found = blocking(move || {
        verify_link(&dir, &token).filter(|l| !loops::closed_long_ago(l, SystemTime::now()))
    });
    let Some(link) = found.await else {
        return not_found().await;
    };
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let parsed = match json {
        true => serde_json::from_slice::<AnswerBody>(&body).map_err(|e| e.to_string()),
        false => Ok(AnswerBody::from_form(&body)),
    };
    let body = match parsed {
        Ok(b) => b,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!(
                    "The body is not an answer ({e}). Send {{\"answer\": \"text\"}} or {{\"option\": 2}}."
                ),
                &headers,
            );
        }
    };
    let action = match body.action.as_deref() {
        None => None,
        Some("skip") => Some(loops::Action::Skip),
        Some("extend") => Some(loops::Action::Extend(loops::PAGE_EXTEND)),
        Some(other) => {
            return reply(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("Unknown action {other:?}: it is \"skip\" or \"extend\"."),
                &headers,
            );
        }
    };
    // Part of the hash, not of the token: clarifications.md may be committed; the link is secret.
    let who = format!("answer link {}", &link.hash[..6]);
    let reply_to = body.reply();
    let outcome = tokio::task::spawn_blocking(move || match action {
        Some(a) => loops::act(&link, a),
        None => loops::answer_link(&link, &reply_to, &Sender::Web(who)),
    })
    .await
    .unwrap_or_else(|e| Receipt::Invalid(format!("the answer could not be written: {e}")));
    let (status, code) = match &outcome {
        Receipt::Accepted { .. } => (StatusCode::OK, "answered"),
        Receipt::Requested(_) => (StatusCode::ACCEPTED, "requested"),
        Receipt::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
        Receipt::AlreadyAnswered(_) => (StatusCode::CONFLICT, "already_answered"),
        Receipt::Skipped => (StatusCode::CONFLICT, "skipped"),
        Receipt::NotWaiting(_) => (StatusCode::CONFLICT, "not_waiting"),
    };
    reply(status, code, &outcome.message(), &headers)
}

/// The reply to a POST: JSON for the page's script and other programs, a page for a form
/// (titled by what `code` says became of it).
fn reply(status: StatusCode, code: &str, message: &str, headers: &HeaderMap) -> Response {
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.starts_with("text/html"));
    if wants_html {
        let html = match code {
            "answered" => page::message("Answered", message),
            "requested" => page::message("Passed to the loop", message),
            // The dashboard's Stop button: back to the list, which shows the loop stopping.
            "stopping" => page::message_back("Stopping", message),
            "not_running" => page::message_back("Not stopped", message),
            "invalid" | "already_answered" | "skipped" | "not_waiting" => {
                page::message("Not answered", message)
            }
            _ => page::message("Refused", message),
        };
        return (status, Html(html)).into_response();
    }
    let body = serde_json::json!({"status": code, "message": message});
    (status, axum::Json(body)).into_response()
}

/// A `changed` event's data: the question's time left now (`left_ms`, `null` for no deadline)
/// and whether its deadline passed.
fn changed_data(q: &loops::QuestionView) -> String {
    let left_ms = q.deadline.map(|d| {
        d.duration_since(std::time::SystemTime::now())
            .unwrap_or_default()
            .as_millis()
    });
    serde_json::json!({"left_ms": left_ms, "timed_out": q.timed_out, "live": q.live}).to_string()
}

type Events = Sse<std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>>;

/// The answer to a stream asked for beyond [`streams::MAX_STREAMS`] or
/// [`streams::MAX_STREAMS_PER_HOLDER`].
fn too_many_streams() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        Html(page::message(
            "Too many open pages",
            "This page is open in too many places at once; close some, then reload.",
        )),
    )
        .into_response()
}

async fn question_events(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let dir = app.state_dir.clone();
    let found = blocking(move || {
        let link = verify_link(&dir, &token)?;
        let first = loops::pending(&link)?;
        Some((link, first))
    });
    let Some((link, first)) = found.await else {
        return not_found().await;
    };
    let Some(changes) = app.streams.open(&link.hash, Some(&link.root)) else {
        return too_many_streams();
    };
    // Polled by the connection itself (no task of its own): a client that goes drops it.
    let stream = futures_util::stream::unfold(Some((changes, first)), move |state| {
        let link = link.clone();
        async move {
            let (mut changes, mut last) = state?;
            loop {
                changes.next().await?;
                let link = link.clone();
                let now = tokio::task::spawn_blocking(move || {
                    (loops::pending(&link), loops::closed_how(&link))
                })
                .await
                .ok()?;
                match now {
                    (Some(q), _) if q == last => continue,
                    // The same question, changed (a deadline moved): the page updates it in
                    // place and keeps what the user typed, so the stream goes on.
                    (Some(q), _) => {
                        let event = Event::default().event("changed").data(changed_data(&q));
                        last = q;
                        return Some((Ok(event), Some((changes, last))));
                    }
                    // The question closed: one last event and the stream ends.
                    (None, how) => {
                        return Some((Ok(Event::default().event("closed").data(how)), None));
                    }
                }
            }
        }
    });
    sse(stream)
}

/// What the dashboard's stream keeps between two looks.
struct Dashboard {
    changes: streams::Subscription,
    dir: PathBuf,
    links: Links,
    shown: Option<(Vec<loops::LoopView>, Vec<LoopRow>)>,
    /// The fleet's rows, each loop's diff stat kept a few seconds.
    fleet: Collector,
    /// The request's headers, for its device cookie: a revoked device's stream ends.
    headers: HeaderMap,
}

/// The dashboard's stream: a `loops` event with the whole list (what the page's `<main>`
/// holds) at once, and again whenever a loop starts, ends, asks, is answered or moves on.
async fn dashboard_events(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let dir = app.state_dir.clone();
    let asked = headers.clone();
    let Some(device) = blocking(move || devices::device(&dir, &asked)).await else {
        return not_found().await;
    };
    let Some(changes) = app.streams.open(&format!("device {device}"), None) else {
        return too_many_streams();
    };
    let start = Dashboard {
        changes,
        dir: app.state_dir.clone(),
        links: Links::new(),
        shown: None,
        fleet: fleet_collector(),
        headers: headers.clone(),
    };
    let stream = futures_util::stream::unfold(start, |mut d| async move {
        loop {
            d.changes.next().await?;
            let dir = d.dir.clone();
            let headers = d.headers.clone();
            let mut links = std::mem::take(&mut d.links);
            let mut fleet = std::mem::replace(&mut d.fleet, fleet_collector());
            let (loops, rows, kept, fleet) = tokio::task::spawn_blocking(move || {
                // Revoked while its page was open (`ralph serve revoke`): the stream ends.
                devices::device(&dir, &headers)?;
                let loops = with_links(&dir, loops::all(), &mut links);
                let rows = fleet.collect(None, std::time::Instant::now());
                Some((loops, rows, links, fleet))
            })
            .await
            .ok()??;
            d.links = kept;
            d.fleet = fleet;
            // The clock alone changes nothing worth a new page.
            let mut views: Vec<loops::LoopView> = loops.iter().map(|(l, _)| l.clone()).collect();
            views.iter_mut().for_each(|l| l.row.elapsed_seconds = None);
            let mut still = rows.clone();
            still.iter_mut().for_each(|r| r.elapsed_seconds = None);
            let shown = Some((views, still));
            if d.shown == shown {
                continue;
            }
            d.shown = shown;
            let body = page::dashboard_body(&loops, &rows, SystemTime::now());
            return Some((Ok(Event::default().event("loops").data(body)), d));
        }
    });
    sse(stream)
}

/// The fleet's rows for the dashboard (`ralph_fleet::rows`), without the agent's last line,
/// which the page does not show.
fn fleet_collector() -> Collector {
    Collector::new(Box::new(|_, _| None))
}

/// The answer links a dashboard shows, by loop and question: made once per question, not at
/// every update (each is a file in the state directory).
type Links = HashMap<(PathBuf, QuestionId), String>;

/// `loops`, each with its waiting question's page (a new answer link, unless `links` has one).
fn with_links(
    dir: &std::path::Path,
    loops: Vec<loops::LoopView>,
    links: &mut Links,
) -> Vec<(loops::LoopView, Option<String>)> {
    links.retain(|(root, id), _| {
        loops.iter().any(|l| {
            l.question
                .as_ref()
                .is_some_and(|q| &q.root == root && &q.id == id)
        })
    });
    loops
        .into_iter()
        .map(|l| {
            let link = l.question.as_ref().and_then(|q| {
                let key = (q.root.clone(), q.id.clone());
                if let Some(link) = links.get(&key) {
                    return Some(link.clone());
                }
                let link = format!(
                    "/a/{}",
                    mint_link(dir, &q.root, &q.id, Channel::Dashboard).ok()?
                );
                links.insert(key, link.clone());
                Some(link)
            });
            (l, link)
        })
        .collect()
}

fn sse(stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> Response {
    let boxed: Events = Sse::new(Box::pin(stream));
    boxed.keep_alive(KeepAlive::default()).into_response()
}

async fn dashboard(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let dir = app.state_dir.clone();
    if blocking(move || devices::device(&dir, &headers))
        .await
        .is_none()
    {
        return (
            StatusCode::NOT_FOUND,
            Html(page::message(
                "Not paired",
                "This browser is not paired with this ralph. On the machine, run `ralph serve pair web` and open the link it prints.",
            )),
        )
            .into_response();
    }
    let dir = app.state_dir.clone();
    let (loops, rows) = tokio::task::spawn_blocking(move || {
        let loops = with_links(&dir, loops::all(), &mut Links::new());
        (
            loops,
            fleet_collector().collect(None, std::time::Instant::now()),
        )
    })
    .await
    .unwrap_or_default();
    Html(page::dashboard(&loops, &rows, SystemTime::now())).into_response()
}

/// The body of `POST /stop`: the loop's directory, as the dashboard's form sends it.
#[derive(Debug, Deserialize)]
struct StopBody {
    root: PathBuf,
}

/// Stops a loop, for a paired device only (anyone else gets the stranger's 404).
async fn stop(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    if foreign(&headers, app.public_origin.as_deref()) {
        return reply(
            StatusCode::FORBIDDEN,
            "foreign_origin",
            "Refused: this was sent from another site's page.",
            &headers,
        );
    }
    if devices::device(&app.state_dir, &headers).is_none() {
        return not_found().await;
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let root = match json {
        true => serde_json::from_slice::<StopBody>(&body)
            .ok()
            .map(|b| b.root),
        false => form_urlencoded::parse(&body)
            .find(|(k, _)| k == "root")
            .map(|(_, v)| PathBuf::from(v.into_owned())),
    };
    let Some(root) = root else {
        return reply(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "Say which loop: {\"root\": \"/its/directory\"}.",
            &headers,
        );
    };
    let done = tokio::task::spawn_blocking(move || loops::stop_loop(&root, StopBy::Web))
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    match done {
        Ok(m) => reply(StatusCode::ACCEPTED, "stopping", &m, &headers),
        Err(m) => reply(StatusCode::CONFLICT, "not_running", &m, &headers),
    }
}

async fn pair(
    State(app): State<Arc<App>>,
    Path(code): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !app.pairing.allow("web", SystemTime::now()) {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            Html(page::message(
                "Too many attempts",
                "Too many pairing attempts failed; wait a minute, then open the link again.",
            )),
        )
            .into_response();
    }
    let dir = app.state_dir.clone();
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(cookie) = blocking(move || devices::pair_browser(&dir, &code, agent.as_deref())).await
    else {
        app.pairing.failed("web", SystemTime::now());
        return not_found().await;
    };
    // Cookies are not kept apart by port: over plain http, every web server of this host name
    // that the browser visits gets it (docs/security.md says so). Over https it is a
    // `__Host-` cookie, `Secure`, sent over https only.
    let set = match app.https {
        true => format!(
            "{}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000; Secure",
            devices::SECURE_COOKIE
        ),
        false => format!(
            "{}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000",
            devices::COOKIE
        ),
    };
    let mut res = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&set) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn hosts_are_addresses_localhost_or_the_public_one() {
        for ok in [
            "127.0.0.1:7707",
            "[::1]:7707",
            "localhost:8080",
            "LOCALHOST",
            "10.0.0.2",
        ] {
            assert!(host_allowed(ok, None), "{ok}");
        }
        for bad in [
            "evil.example:7707",
            "evil.example",
            "localhost.evil.example:7707",
            "",
        ] {
            assert!(!host_allowed(bad, None), "{bad}");
        }
        let public = Some("https://box.tailnet.ts.net");
        assert!(host_allowed("box.tailnet.ts.net", public));
        assert!(host_allowed("Box.Tailnet.ts.net:443", public));
        assert!(!host_allowed("box.tailnet.ts.net.evil.example", public));
    }
}
