//! Just enough HTTP/1.1 for one client on localhost: requests with a `Content-Length` or
//! chunked body, keep-alive, and responses with a `Content-Length` body.

use std::io::{self, BufRead, Write};

/// One request as read from the connection.
#[derive(Debug)]
pub struct Request {
    /// `GET`, `HEAD`, `POST`, ...
    pub method: String,
    /// The request target, query included: `/v1/messages?beta=true`.
    pub target: String,
    /// Header names lower-cased, in the order they came.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Request {
    /// The first header called `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// Whether the client wants the connection closed after this request.
    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
    }
}

/// Reads the next request; `None` when the client closed the connection between requests.
pub fn read_request(r: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut line = String::new();
    // Tolerate blank lines before a request line, as RFC 9112 asks.
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(bad(format!("bad request line {line:?}")));
    };
    let (method, target) = (method.to_string(), target.to_string());
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad("connection closed in the headers".into()));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (name, value) = l
            .split_once(':')
            .ok_or_else(|| bad(format!("bad header {l:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut req = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    if req
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
    {
        req.body = read_chunked(r)?;
    } else if let Some(len) = req.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        req.body = vec![0; len];
        r.read_exact(&mut req.body)?;
    }
    Ok(Some(req))
}

fn read_chunked(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let size = line.trim().split(';').next().unwrap_or("");
        let size =
            usize::from_str_radix(size, 16).map_err(|_| bad(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Trailers, then the blank line.
            loop {
                line.clear();
                if r.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        line.clear();
        r.read_line(&mut line)?;
    }
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Writes a response. For `HEAD`, pass `head_only` so only the headers go out.
pub fn write_response(
    w: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    write!(
        w,
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         request-id: req_mock\r\nconnection: keep-alive\r\n\r\n",
        reason(status),
        body.len()
    )?;
    if !head_only {
        w.write_all(body)?;
    }
    w.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_length_body_is_read_and_the_next_request_follows() {
        let raw = b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n";
        let mut r = &raw[..];
        let a = read_request(&mut r).unwrap().unwrap();
        assert_eq!((a.method.as_str(), a.path()), ("POST", "/v1/messages"));
        assert_eq!(a.body, b"{}");
        let b = read_request(&mut r).unwrap().unwrap();
        assert_eq!(b.method, "HEAD");
        assert!(b.wants_close());
        assert!(read_request(&mut r).unwrap().is_none());
    }

    #[test]
    fn a_chunked_body_is_joined() {
        let raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let req = read_request(&mut &raw[..]).unwrap().unwrap();
        assert_eq!(req.body, b"abcde");
    }

    #[test]
    fn head_responses_have_no_body() {
        let mut out = Vec::new();
        write_response(&mut out, 200, "text/plain", b"hello", true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("content-length: 5\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
    }
}
