//! Request handling: routing, fault injection, authentication, the OCS envelope, and the
//! endpoints themselves.

use super::enc;
use super::state::{NewMsg, Outgoing, State, Verb};
use super::{BOT_FEATURE_RESPONSE, FaultAction, Route, Shared};
use axum::body::Body;
use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, Method, header};
use axum::response::Response;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const SPREED: &str = "/ocs/v2.php/apps/spreed/api/";
const CAPABILITIES: &str = "/ocs/v2.php/cloud/capabilities";
/// Largest request body the fake reads (the message limit is checked on characters anyway).
const MAX_BODY: usize = 16 * 1024 * 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fmt {
    Json,
    Xml,
}

/// A matched endpoint.
enum Ep {
    Capabilities,
    RoomList,
    Room(String),
    Participants(String),
    ChatGet(String),
    ChatPost(String),
    MarkRead(String),
    Edit(String, i64),
    Delete(String, i64),
    Reaction(Method, String, i64),
    BotMessage(String),
    BotReaction(Method, String, i64),
}

impl Ep {
    fn route(&self) -> Route {
        match self {
            Ep::Capabilities => Route::Capabilities,
            Ep::RoomList => Route::RoomList,
            Ep::Room(_) => Route::Room,
            Ep::Participants(_) => Route::Participants,
            Ep::ChatGet(_) => Route::Chat,
            Ep::ChatPost(_) => Route::Post,
            Ep::MarkRead(_) => Route::MarkRead,
            Ep::Edit(..) => Route::Edit,
            Ep::Delete(..) => Route::Delete,
            Ep::Reaction(..) => Route::Reaction,
            Ep::BotMessage(_) => Route::BotMessage,
            Ep::BotReaction(..) => Route::BotReaction,
        }
    }
}

/// Spreed's route requirement for tokens: `[a-z0-9]{4,30}`.
fn valid_token(t: &str) -> bool {
    (4..=30).contains(&t.len())
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn classify(method: &Method, path: &str) -> Option<Ep> {
    if path == CAPABILITIES {
        return (method == Method::GET).then_some(Ep::Capabilities);
    }
    let rest = path.strip_prefix(SPREED)?;
    let segs: Vec<&str> = rest.split('/').collect();
    let tok = |t: &str| valid_token(t).then(|| t.to_string());
    let num = |n: &str| {
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .then(|| n.parse::<i64>().ok())
            .flatten()
    };
    let m = method.as_str();
    Some(match segs.as_slice() {
        ["v4", "room"] if m == "GET" => Ep::RoomList,
        ["v4", "room", t] if m == "GET" => Ep::Room(tok(t)?),
        ["v4", "room", t, "participants"] if m == "GET" => Ep::Participants(tok(t)?),
        ["v1", "chat", t] if m == "GET" => Ep::ChatGet(tok(t)?),
        ["v1", "chat", t] if m == "POST" => Ep::ChatPost(tok(t)?),
        ["v1", "chat", t, "read"] if m == "POST" => Ep::MarkRead(tok(t)?),
        ["v1", "chat", t, id] if m == "PUT" => Ep::Edit(tok(t)?, num(id)?),
        ["v1", "chat", t, id] if m == "DELETE" => Ep::Delete(tok(t)?, num(id)?),
        ["v1", "reaction", t, id] if matches!(m, "GET" | "POST" | "DELETE") => {
            Ep::Reaction(method.clone(), tok(t)?, num(id)?)
        }
        ["v1", "bot", t, "message"] if m == "POST" => Ep::BotMessage(tok(t)?),
        ["v1", "bot", t, "reaction", id] if matches!(m, "POST" | "DELETE") => {
            Ep::BotReaction(method.clone(), tok(t)?, num(id)?)
        }
        _ => return None,
    })
}

/// Request parameters as Nextcloud merges them: query string, then form or JSON body.
struct Params(HashMap<String, String>);

impl Params {
    fn parse(query: &str, headers: &HeaderMap, body: &[u8]) -> Params {
        let mut map: HashMap<String, String> = enc::parse_urlencoded(query).into_iter().collect();
        let ctype = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ctype.contains("json") {
            if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) {
                for (k, v) in o {
                    let s = match v {
                        Value::String(s) => s,
                        Value::Bool(true) => "1".into(),
                        Value::Bool(false) => String::new(),
                        Value::Null => continue,
                        Value::Number(n) => n.to_string(),
                        other => other.to_string(),
                    };
                    map.insert(k, s);
                }
            }
        } else if !body.is_empty() {
            map.extend(enc::parse_urlencoded(&String::from_utf8_lossy(body)));
        }
        Params(map)
    }

    fn str(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    /// PHP's `(int)` cast of a request parameter.
    fn int(&self, k: &str, default: i64) -> i64 {
        let Some(s) = self.str(k) else {
            return default;
        };
        let s = s.trim();
        let (neg, digits) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let n: i64 = digits
            .bytes()
            .take_while(u8::is_ascii_digit)
            .fold(0i64, |acc, b| {
                acc.saturating_mul(10).saturating_add((b - b'0') as i64)
            });
        if neg { -n } else { n }
    }

    fn bool(&self, k: &str) -> bool {
        !matches!(self.str(k), None | Some("") | Some("0") | Some("false"))
    }
}

fn format_of(headers: &HeaderMap, query: &str) -> Fmt {
    let from_param = enc::parse_urlencoded(query)
        .into_iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v);
    if let Some(f) = from_param {
        return if f == "json" { Fmt::Json } else { Fmt::Xml };
    }
    // OCSController::getResponderByHTTPHeader: the first Accept entry naming a responder wins.
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    for part in accept.split(',') {
        let p = part
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match p.strip_prefix("application/") {
            Some("json") => return Fmt::Json,
            Some("xml") => return Fmt::Xml,
            _ => {}
        }
    }
    Fmt::Xml
}

fn basic_auth(headers: &HeaderMap) -> Option<(String, String)> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(enc::base64_decode(rest)?).ok()?;
    let (u, p) = decoded.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

// ------------------------------------------------------------------ responses

fn response(
    status: u16,
    ctype: Option<&str>,
    body: String,
    headers: &[(&str, String)],
) -> Response {
    let mut b = Response::builder().status(status);
    if let Some(c) = ctype {
        b = b.header(header::CONTENT_TYPE, c);
    }
    for (k, v) in headers {
        b = b.header(*k, v);
    }
    b.body(Body::from(body)).expect("valid response")
}

/// The OCS v2 envelope (`V2Response::render`): HTTP status = OCS status, `meta.status` is
/// `ok` for 2xx, `meta.message` is `OK` for 2xx. 304 and 204 have no body.
fn ocs_full(
    fmt: Fmt,
    http: u16,
    ocs_status: u16,
    message: &str,
    data: Value,
    headers: &[(&str, String)],
) -> Response {
    if http == 304 || http == 204 {
        return response(http, None, String::new(), headers);
    }
    let ok = (200..300).contains(&ocs_status);
    let doc = json!({"ocs": {
        "meta": {
            "status": if ok { "ok" } else { "failure" },
            "statuscode": ocs_status,
            "message": if ok { "OK" } else { message },
        },
        "data": data,
    }});
    match fmt {
        Fmt::Json => response(
            http,
            Some("application/json; charset=utf-8"),
            enc::php_json(&doc, true),
            headers,
        ),
        Fmt::Xml => response(
            http,
            Some("application/xml; charset=utf-8"),
            enc::ocs_xml(&doc),
            headers,
        ),
    }
}

fn ocs(fmt: Fmt, status: u16, data: Value, headers: &[(&str, String)]) -> Response {
    ocs_full(fmt, status, status, "", data, headers)
}

fn not_found(fmt: Fmt) -> Response {
    ocs(fmt, 404, json!([]), &[])
}

fn error(fmt: Fmt, status: u16, what: &str) -> Response {
    ocs(fmt, status, json!({"error": what}), &[])
}

fn not_modified() -> Response {
    response(304, None, String::new(), &[])
}

// ------------------------------------------------------------------ entry

pub(crate) async fn handle(AxState(shared): AxState<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let ep = classify(&parts.method, &path);
    let route = ep.as_ref().map_or(Route::Other, Ep::route);
    let fmt = format_of(&parts.headers, &query);
    let creds = basic_auth(&parts.headers);

    let (seq, fault) = {
        let mut st = shared.lock();
        let seq = st.next_request_seq;
        st.next_request_seq += 1;
        st.requests.push(super::RequestRecord {
            seq,
            method: parts.method.to_string(),
            path: path.clone(),
            query: query.clone(),
            route,
            user: creds.as_ref().map(|c| c.0.clone()),
            status: None,
            at: std::time::Instant::now(),
        });
        (seq, super::take_fault(&mut st, route))
    };
    shared.bump();

    let resp = match fault {
        Some(FaultAction::Fail {
            status,
            retry_after,
        }) => {
            let mut headers = Vec::new();
            if let Some(s) = retry_after {
                headers.push(("Retry-After", s.to_string()));
            }
            if status == 503 {
                headers.push(("X-Nextcloud-Maintenance-Mode", "1".to_string()));
            }
            ocs(fmt, status, json!([]), &headers)
        }
        Some(FaultAction::Hang) => {
            // Never answers; released (503) only when the fake shuts down.
            let mut rx = shared.shutdown.subscribe();
            let _ = rx.wait_for(|v| *v).await;
            ocs(fmt, 503, json!([]), &[])
        }
        None => {
            let bytes = axum::body::to_bytes(body, MAX_BODY)
                .await
                .unwrap_or_default();
            process(&shared, fmt, ep, creds, &parts.headers, &query, &bytes).await
        }
    };

    {
        let mut st = shared.lock();
        if let Some(r) = st.requests.iter_mut().rev().find(|r| r.seq == seq) {
            r.status = Some(resp.status().as_u16());
        }
    }
    shared.bump();
    resp
}

async fn process(
    shared: &Arc<Shared>,
    fmt: Fmt,
    ep: Option<Ep>,
    creds: Option<(String, String)>,
    headers: &HeaderMap,
    query: &str,
    body: &[u8],
) -> Response {
    let Some(ep) = ep else {
        return ocs_full(
            fmt,
            404,
            404,
            "Invalid query, please check the syntax. API specifications are here: http://www.freedesktop.org/wiki/Specifications/open-collaboration-services.",
            json!([]),
            &[],
        );
    };
    // Basic auth with an app password; a failed login continues as an anonymous request.
    let user = creds.and_then(|(u, p)| {
        let st = shared.lock();
        let known = st.users.get(&u)?;
        (known.password.as_deref() == Some(p.as_str())).then_some(u)
    });
    // SecurityMiddleware: the login check (non-public pages) comes before the CSRF check.
    if matches!(ep, Ep::RoomList) && user.is_none() {
        return ocs_full(
            fmt,
            401,
            997,
            "Current user is not logged in",
            json!([]),
            &[],
        );
    }
    // CSRF: OCS requests pass it only with `OCS-APIRequest: true` (the capabilities endpoint
    // is exempt).
    let ocs_header = headers.get("OCS-APIRequest").and_then(|v| v.to_str().ok()) == Some("true");
    if !matches!(ep, Ep::Capabilities) && !ocs_header {
        return response(
            412,
            Some("application/json; charset=utf-8"),
            enc::php_json(&json!({"message": "CSRF check failed"}), false),
            &[],
        );
    }
    let params = Params::parse(query, headers, body);
    match ep {
        Ep::Capabilities => capabilities(shared, fmt),
        Ep::RoomList => room_list(shared, fmt, &user.unwrap_or_default(), &params),
        Ep::Room(t) => single_room(shared, fmt, user.as_deref(), &t),
        Ep::Participants(t) => participants(shared, fmt, user.as_deref(), &t),
        Ep::ChatGet(t) => chat_get(shared, fmt, user, t, &params).await,
        Ep::ChatPost(t) => {
            let (resp, out) = shared.mutate(|st| chat_post(st, fmt, user.as_deref(), &t, &params));
            super::dispatch(shared, out);
            resp
        }
        Ep::MarkRead(t) => shared.mutate(|st| mark_read(st, fmt, user.as_deref(), &t, &params)),
        Ep::Edit(t, id) => shared.mutate(|st| edit(st, fmt, user.as_deref(), &t, id, &params)),
        Ep::Delete(t, id) => shared.mutate(|st| delete(st, fmt, user.as_deref(), &t, id)),
        Ep::Reaction(m, t, id) => {
            shared.mutate(|st| reaction(st, fmt, user.as_deref(), &m, &t, id, &params))
        }
        Ep::BotMessage(t) => {
            let (resp, out) = shared.mutate(|st| bot_message(st, fmt, headers, &t, &params));
            super::dispatch(shared, out);
            resp
        }
        Ep::BotReaction(m, t, id) => {
            shared.mutate(|st| bot_reaction(st, fmt, headers, &m, &t, id, &params))
        }
    }
}

// ------------------------------------------------------------------ endpoints

fn capabilities(shared: &Shared, fmt: Fmt) -> Response {
    let st = shared.lock();
    let data = json!({
        "version": {"major": 31, "minor": 0, "micro": 0, "string": "31.0.0", "edition": "", "extendedSupport": false},
        "capabilities": {
            "spreed": {
                "features": [
                    "audio", "video", "chat-v2", "conversation-v4", "last-room-activity",
                    "system-messages", "mention-flag", "direct-mention-flag", "in-call-flags",
                    "notification-levels", "read-only-rooms", "chat-read-marker", "chat-replies",
                    "chat-reference-id", "chat-read-status", "delete-messages", "rich-object-sharing",
                    "reactions", "silent-send", "silent-send-state", "chat-keep-notifications",
                    "bots-v1", "markdown-messages", "edit-messages", "delete-messages-unlimited",
                    "chat-read-last", "note-to-self",
                ],
                "config": {
                    "attachments": {"allowed": false},
                    "chat": {
                        "max-length": st.max_length,
                        "read-privacy": 0,
                        "has-translation-providers": false,
                        "typing-privacy": 0,
                    },
                    "conversations": {"can-create": true},
                    "previews": {"max-gif-size": 3_145_728},
                },
                "version": "21.0.0",
            },
        },
    });
    ocs(fmt, 200, data, &[])
}

fn room_list(shared: &Shared, fmt: Fmt, user: &str, params: &Params) -> Response {
    let st = shared.lock();
    // RoomController::getRooms: the header is taken before the query; `>=` comparisons.
    let now = st.now();
    let since = params.int("modifiedSince", 0);
    let rooms: Vec<Value> = st
        .rooms
        .values()
        .filter_map(|r| {
            let p = r.participants.iter().find(|p| p.user == user)?;
            let keep = since == 0 || r.last_activity >= since || p.last_attendee_activity >= since;
            keep.then(|| st.render_room(r, user))
        })
        .collect();
    ocs(
        fmt,
        200,
        Value::Array(rooms),
        &[
            ("X-Nextcloud-Talk-Hash", st.talk_hash()),
            ("X-Nextcloud-Talk-Modified-Before", now.to_string()),
        ],
    )
}

fn single_room(shared: &Shared, fmt: Fmt, user: Option<&str>, token: &str) -> Response {
    let st = shared.lock();
    match (user, st.rooms.get(token)) {
        (Some(u), Some(r)) if st.participant(token, u).is_some() => ocs(
            fmt,
            200,
            st.render_room(r, u),
            &[("X-Nextcloud-Talk-Hash", st.talk_hash())],
        ),
        _ => not_found(fmt),
    }
}

fn participants(shared: &Shared, fmt: Fmt, user: Option<&str>, token: &str) -> Response {
    let st = shared.lock();
    match (user, st.rooms.get(token)) {
        (Some(u), Some(r)) if st.participant(token, u).is_some() => {
            ocs(fmt, 200, st.render_participants(r), &[])
        }
        _ => not_found(fmt),
    }
}

/// Message ids for a chat request, as `getForObjectSince` selects them: ascending after the
/// offset for `lookIntoFuture=1` (from the start when 0), descending before it otherwise
/// (the newest when 0). `limit <= 0` means no limit.
fn select_ids(ids: &[i64], future: bool, last_known: i64, include: bool, limit: i64) -> Vec<i64> {
    let take = if limit > 0 {
        limit as usize
    } else {
        usize::MAX
    };
    if future {
        let from = ids.partition_point(|id| *id < last_known || (!include && *id == last_known));
        ids[from..].iter().copied().take(take).collect()
    } else {
        let to = if last_known <= 0 {
            ids.len()
        } else {
            ids.partition_point(|id| *id < last_known || (include && *id == last_known))
        };
        ids[..to].iter().rev().copied().take(take).collect()
    }
}

async fn chat_get(
    shared: &Arc<Shared>,
    fmt: Fmt,
    user: Option<String>,
    token: String,
    params: &Params,
) -> Response {
    let Some(user) = user else {
        return not_found(fmt);
    };
    let future = params.int("lookIntoFuture", 0) != 0;
    let limit = params.int("limit", 100).min(200);
    let last_known = params.int("lastKnownMessageId", 0);
    let last_common = params.int("lastCommonReadId", 0);
    let timeout = params.int("timeout", 30).clamp(0, 30) as u64;
    let set_read_marker = params.int("setReadMarker", 1);
    let include = params.int("includeLastKnown", 0) != 0;

    let cap = {
        let mut st = shared.lock();
        let now = st.now();
        let Some(p) = st.participant_mut(&token, &user) else {
            return not_found(fmt);
        };
        if future && set_read_marker == 1 && last_known > p.last_read {
            p.last_read = last_known;
            p.last_attendee_activity = now;
        }
        st.long_poll_cap
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout).min(cap);
    let mut shutdown = shared.shutdown.subscribe();
    let ids = loop {
        let (ids, rx) = {
            let st = shared.lock();
            let room = &st.rooms[&token];
            let ids = select_ids(&room.msg_ids, future, last_known, include, limit);
            let rx = (future && ids.is_empty()).then(|| room.tx.subscribe());
            (ids, rx)
        };
        let Some(mut rx) = rx else { break ids };
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { break ids },
            _ = tokio::time::sleep_until(deadline) => break ids,
            _ = shutdown.wait_for(|v| *v) => break ids,
        }
    };

    let st = shared.lock();
    let room = &st.rooms[&token];
    let common = st.last_common_read(room);
    if ids.is_empty() {
        if last_common != 0 && last_common != common {
            return ocs(
                fmt,
                200,
                json!([]),
                &[("X-Chat-Last-Common-Read", common.to_string())],
            );
        }
        return not_modified();
    }
    let messages: Vec<Value> = ids
        .iter()
        .filter_map(|id| st.msgs.get(id))
        .filter(|m| !m.expired)
        .map(|m| st.render_full(m, Some(&user)))
        .collect();
    let last_given = ids.last().copied().unwrap_or_default();
    ocs(
        fmt,
        200,
        Value::Array(messages),
        &[
            ("X-Chat-Last-Given", last_given.to_string()),
            ("X-Chat-Last-Common-Read", common.to_string()),
        ],
    )
}

/// Whether `id` is a message of `token` that can be replied to (`Message::isReplyable`).
fn replyable(st: &State, token: &str, id: i64) -> bool {
    st.msgs.get(&id).is_some_and(|m| {
        m.token == token
            && m.verb == Verb::Comment
            && matches!(
                m.actor_type.as_str(),
                "users" | "federated_users" | "guests" | "emails" | "bots"
            )
    })
}

/// `ChatController::sendMessage`.
fn chat_post(
    st: &mut State,
    fmt: Fmt,
    user: Option<&str>,
    token: &str,
    params: &Params,
) -> (Response, Vec<Outgoing>) {
    let Some(user) = user.filter(|u| st.participant(token, u).is_some()) else {
        return (not_found(fmt), Vec::new());
    };
    let message = params.str("message").unwrap_or_default();
    if message.trim().is_empty() {
        return (error(fmt, 400, "message"), Vec::new());
    }
    let reply_to = params.int("replyTo", 0);
    if reply_to != 0 && !replyable(st, token, reply_to) {
        return (error(fmt, 400, "reply-to"), Vec::new());
    }
    let reference_id = params
        .str("referenceId")
        .unwrap_or_default()
        .trim()
        .to_string();
    if reference_id.chars().count() > 64 {
        // The comments table stores at most 64 characters; the insert fails.
        return (error(fmt, 400, "message"), Vec::new());
    }
    if message.trim().chars().count() > st.max_length {
        return (error(fmt, 413, "message"), Vec::new());
    }
    let mut nm = NewMsg::new("users", user, Verb::Comment, message.trim());
    nm.parent = (reply_to != 0).then_some(reply_to);
    nm.reference_id = reference_id;
    nm.silent = params.bool("silent");
    let id = st.insert(token, nm);
    let out = st.webhooks_for(id);
    let data = st.render_full(&st.msgs[&id], Some(user));
    let common = st.last_common_read(&st.rooms[token]);
    (
        ocs(
            fmt,
            201,
            data,
            &[("X-Chat-Last-Common-Read", common.to_string())],
        ),
        out,
    )
}

fn mark_read(
    st: &mut State,
    fmt: Fmt,
    user: Option<&str>,
    token: &str,
    params: &Params,
) -> Response {
    let Some(user) = user.filter(|u| st.participant(token, u).is_some()) else {
        return not_found(fmt);
    };
    let now = st.now();
    let last = st.rooms[token].msg_ids.last().copied().unwrap_or(0);
    let target = match params.str("lastReadMessage") {
        Some(s) if !s.is_empty() => params.int("lastReadMessage", last),
        _ => last,
    };
    if let Some(p) = st.participant_mut(token, user) {
        p.last_read = target;
        p.last_attendee_activity = now;
    }
    let common = st.last_common_read(&st.rooms[token]);
    let data = st.render_room(&st.rooms[token], user);
    ocs(
        fmt,
        200,
        data,
        &[("X-Chat-Last-Common-Read", common.to_string())],
    )
}

/// Shared checks of `editMessage` / `deleteMessage`: 404, 403, 405.
fn check_own_message(
    st: &State,
    user: &str,
    token: &str,
    id: i64,
) -> Result<(), (u16, &'static str)> {
    let Some(m) = st.msgs.get(&id).filter(|m| m.token == token) else {
        return Err((404, "message"));
    };
    let room = &st.rooms[token];
    let own = m.actor_type == "users" && m.actor_id == user;
    let bot_in_one_to_one =
        m.actor_type == "bots" && m.actor_id.starts_with("bot-") && matches!(room.room_type, 1 | 5);
    if !(own || bot_in_one_to_one)
        && (!st.is_moderator(token, user) || matches!(room.room_type, 1 | 5))
    {
        return Err((403, "permission"));
    }
    if m.verb != Verb::Comment {
        return Err((405, "message"));
    }
    Ok(())
}

/// `ChatController::editMessage`: 200 (202 with a webhook bot) and the `message_edited`
/// system message whose `parent` is the edited message.
fn edit(
    st: &mut State,
    fmt: Fmt,
    user: Option<&str>,
    token: &str,
    id: i64,
    params: &Params,
) -> Response {
    let Some(user) = user.filter(|u| st.participant(token, u).is_some()) else {
        return not_found(fmt);
    };
    if let Err((status, what)) = check_own_message(st, user, token, id) {
        return error(fmt, status, what);
    }
    if st.rooms[token].room_type != 6 && st.msgs[&id].ts < st.now() - 86_400 {
        return error(fmt, 400, "age");
    }
    let message = params.str("message").unwrap_or_default().trim().to_string();
    if message.is_empty() {
        return error(fmt, 400, "message");
    }
    if message.chars().count() > st.max_length {
        return error(fmt, 413, "message");
    }
    let sys = st.edit_message(token, id, "users", user, &message);
    changed_response(st, fmt, token, sys, user)
}

/// `ChatController::deleteMessage`.
fn delete(st: &mut State, fmt: Fmt, user: Option<&str>, token: &str, id: i64) -> Response {
    let Some(user) = user.filter(|u| st.participant(token, u).is_some()) else {
        return not_found(fmt);
    };
    if let Err((status, what)) = check_own_message(st, user, token, id) {
        return error(fmt, status, what);
    }
    let sys = st.delete_message(token, id, "users", user);
    changed_response(st, fmt, token, sys, user)
}

fn changed_response(st: &State, fmt: Fmt, token: &str, sys: i64, user: &str) -> Response {
    let data = st.render_full(&st.msgs[&sys], Some(user));
    let status = if st.has_webhook_bot(token) { 202 } else { 200 };
    let common = st.last_common_read(&st.rooms[token]);
    ocs(
        fmt,
        status,
        data,
        &[("X-Chat-Last-Common-Read", common.to_string())],
    )
}

/// `ReactionController` (`docs/reaction.md`).
fn reaction(
    st: &mut State,
    fmt: Fmt,
    user: Option<&str>,
    method: &Method,
    token: &str,
    id: i64,
    params: &Params,
) -> Response {
    let Some(user) = user.filter(|u| st.participant(token, u).is_some()) else {
        return not_found(fmt);
    };
    let emoji = params.str("reaction").unwrap_or_default().to_string();
    match *method {
        Method::POST => match st.add_reaction(token, id, "users", user, &emoji) {
            Ok(created) => ocs(
                fmt,
                if created.is_some() { 201 } else { 200 },
                st.reactions_of(id, None),
                &[],
            ),
            Err(status) => ocs(fmt, status, json!([]), &[]),
        },
        Method::DELETE => match st.remove_reaction(token, id, "users", user, &emoji) {
            Ok(_) => ocs(fmt, 200, st.reactions_of(id, None), &[]),
            Err(status) => ocs(fmt, status, json!([]), &[]),
        },
        _ => {
            if !st
                .msgs
                .get(&id)
                .is_some_and(|m| m.token == token && m.verb == Verb::Comment)
            {
                return not_found(fmt);
            }
            let filter = params.str("reaction").filter(|s| !s.is_empty());
            ocs(fmt, 200, st.reactions_of(id, filter), &[])
        }
    }
}

/// `BotController::getBotFromHeaders`: 400 for a missing/short random or a missing
/// signature, 401 when no bot with the `response` feature in the room signed `payload`.
fn verify_bot(st: &State, headers: &HeaderMap, token: &str, payload: &str) -> Result<String, u16> {
    let get = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let random = get("X-Nextcloud-Talk-Bot-Random");
    if random.len() < 32 {
        return Err(400);
    }
    let signature = get("X-Nextcloud-Talk-Bot-Signature").to_ascii_lowercase();
    if signature.is_empty() {
        return Err(400);
    }
    st.bots
        .values()
        .filter(|b| b.rooms.contains(token) && b.features & BOT_FEATURE_RESPONSE != 0)
        .find(|b| {
            enc::ct_eq(
                &enc::talk_signature(&b.secret, &random, payload),
                &signature,
            )
        })
        .map(|b| b.actor_id())
        .ok_or(401)
}

/// `BotController::sendMessage` (`docs/bots.md` "Sending a chat message"): signature over
/// random + message text; 201 with no data; actor `bots` / `bot-<sha1(url)>`.
fn bot_message(
    st: &mut State,
    fmt: Fmt,
    headers: &HeaderMap,
    token: &str,
    params: &Params,
) -> (Response, Vec<Outgoing>) {
    let message = params.str("message").unwrap_or_default().to_string();
    if message.trim().is_empty() {
        return (ocs(fmt, 400, Value::Null, &[]), Vec::new());
    }
    let actor = match verify_bot(st, headers, token, &message) {
        Ok(a) => a,
        Err(status) => return (ocs(fmt, status, Value::Null, &[]), Vec::new()),
    };
    let reply_to = params.int("replyTo", 0);
    if reply_to != 0 && st.msgs.get(&reply_to).is_none_or(|m| m.token != token) {
        return (ocs(fmt, 400, Value::Null, &[]), Vec::new());
    }
    if message.trim().chars().count() > st.max_length {
        return (ocs(fmt, 413, Value::Null, &[]), Vec::new());
    }
    let reference_id = params
        .str("referenceId")
        .unwrap_or_default()
        .trim()
        .to_string();
    if reference_id.chars().count() > 64 {
        return (ocs(fmt, 400, Value::Null, &[]), Vec::new());
    }
    let mut nm = NewMsg::new("bots", &actor, Verb::Comment, message.trim());
    nm.parent = (reply_to != 0).then_some(reply_to);
    nm.reference_id = reference_id;
    nm.silent = params.bool("silent");
    let id = st.insert(token, nm);
    let out = st.webhooks_for(id);
    (ocs(fmt, 201, Value::Null, &[]), out)
}

/// `BotController::react` / `deleteReaction`: signature over random + reaction.
fn bot_reaction(
    st: &mut State,
    fmt: Fmt,
    headers: &HeaderMap,
    method: &Method,
    token: &str,
    id: i64,
    params: &Params,
) -> Response {
    let emoji = params.str("reaction").unwrap_or_default().to_string();
    let actor = match verify_bot(st, headers, token, &emoji) {
        Ok(a) => a,
        Err(status) => return ocs(fmt, status, Value::Null, &[]),
    };
    if *method == Method::POST {
        match st.add_reaction(token, id, "bots", &actor, &emoji) {
            Ok(Some(_)) => ocs(fmt, 201, Value::Null, &[]),
            Ok(None) => ocs(fmt, 200, Value::Null, &[]),
            Err(status) => ocs(fmt, status, Value::Null, &[]),
        }
    } else {
        match st.remove_reaction(token, id, "bots", &actor, &emoji) {
            Ok(_) => ocs(fmt, 200, Value::Null, &[]),
            Err(_) => ocs(fmt, 404, Value::Null, &[]),
        }
    }
}

impl State {
    /// `ChatManager::editMessage`.
    pub fn edit_message(
        &mut self,
        token: &str,
        id: i64,
        actor_type: &str,
        actor_id: &str,
        text: &str,
    ) -> i64 {
        let now = self.now();
        if let Some(m) = self.msgs.get_mut(&id) {
            m.text = text.trim().to_string();
            m.last_edit = Some((actor_type.to_string(), actor_id.to_string(), now));
        }
        self.track_mentions(token, id);
        let mut nm = NewMsg::new(actor_type, actor_id, Verb::System, "message_edited");
        nm.parent = Some(id);
        self.insert(token, nm)
    }

    /// `ChatManager::deleteMessage`: the message becomes `comment_deleted` and a
    /// `message_deleted` system message with it as `parent` follows.
    pub fn delete_message(
        &mut self,
        token: &str,
        id: i64,
        actor_type: &str,
        actor_id: &str,
    ) -> i64 {
        if let Some(m) = self.msgs.get_mut(&id) {
            m.verb = Verb::Deleted;
            m.deleted_by = Some((actor_type.to_string(), actor_id.to_string()));
        }
        let mut nm = NewMsg::new(actor_type, actor_id, Verb::System, "message_deleted");
        nm.parent = Some(id);
        self.insert(token, nm)
    }

    /// `ReactionManager::addReactionMessage`: `Ok(Some(id))` of the new `reaction` message,
    /// `Ok(None)` when the actor already reacted so, `Err(status)` otherwise.
    pub fn add_reaction(
        &mut self,
        token: &str,
        id: i64,
        actor_type: &str,
        actor_id: &str,
        emoji: &str,
    ) -> Result<Option<i64>, u16> {
        let Some(m) = self.msgs.get(&id).filter(|m| m.token == token) else {
            return Err(404);
        };
        if m.verb != Verb::Comment || emoji.is_empty() {
            return Err(400);
        }
        if m.reactions
            .iter()
            .any(|r| r.emoji == emoji && r.actor_type == actor_type && r.actor_id == actor_id)
        {
            return Ok(None);
        }
        let mut nm = NewMsg::new(actor_type, actor_id, Verb::Reaction, emoji);
        nm.parent = Some(id);
        let rid = self.insert(token, nm);
        let ts = self.msgs[&rid].ts;
        if let Some(m) = self.msgs.get_mut(&id) {
            m.reactions.push(super::state::Reaction {
                emoji: emoji.to_string(),
                actor_type: actor_type.to_string(),
                actor_id: actor_id.to_string(),
                ts,
                msg_id: rid,
            });
        }
        Ok(Some(rid))
    }

    /// `ReactionManager::deleteReactionMessage`: the `reaction` message becomes
    /// `reaction_deleted` and a `reaction_revoked` system message follows.
    pub fn remove_reaction(
        &mut self,
        token: &str,
        id: i64,
        actor_type: &str,
        actor_id: &str,
        emoji: &str,
    ) -> Result<i64, u16> {
        let Some(m) = self.msgs.get_mut(&id).filter(|m| m.token == token) else {
            return Err(404);
        };
        let Some(pos) = m
            .reactions
            .iter()
            .position(|r| r.emoji == emoji && r.actor_type == actor_type && r.actor_id == actor_id)
        else {
            return Err(404);
        };
        let r = m.reactions.remove(pos);
        if let Some(rm) = self.msgs.get_mut(&r.msg_id) {
            rm.verb = Verb::ReactionDeleted;
        }
        let mut nm = NewMsg::new(actor_type, actor_id, Verb::System, "reaction_revoked");
        nm.parent = Some(id);
        Ok(self.insert(token, nm))
    }

    /// `ReactionManager::retrieveReactionMessages`: emoji → list of reacting actors.
    pub fn reactions_of(&self, id: i64, only: Option<&str>) -> Value {
        let mut out: Map<String, Value> = Map::new();
        if let Some(m) = self.msgs.get(&id) {
            for r in m
                .reactions
                .iter()
                .filter(|r| only.is_none_or(|e| e == r.emoji))
            {
                let entry = out.entry(r.emoji.clone()).or_insert_with(|| json!([]));
                if let Some(list) = entry.as_array_mut() {
                    list.push(json!({
                        "actorType": r.actor_type,
                        "actorId": r.actor_id,
                        "actorDisplayName": self.actor_display_name(&r.actor_type, &r.actor_id, ""),
                        "timestamp": r.ts,
                    }));
                }
            }
        }
        if out.is_empty() {
            // ReactionController::formatReactions: always a JSON object.
            return json!({});
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_follow_spreed_requirements() {
        assert!(matches!(
            classify(&Method::GET, "/ocs/v2.php/apps/spreed/api/v4/room"),
            Some(Ep::RoomList)
        ));
        assert!(matches!(
            classify(&Method::GET, "/ocs/v2.php/apps/spreed/api/v1/chat/abcd1234"),
            Some(Ep::ChatGet(_))
        ));
        assert!(classify(&Method::GET, "/ocs/v2.php/apps/spreed/api/v1/chat/ABCD").is_none());
        assert!(classify(&Method::GET, "/ocs/v2.php/apps/spreed/api/v1/chat/abc").is_none());
        assert!(matches!(
            classify(&Method::PUT, "/ocs/v2.php/apps/spreed/api/v1/chat/abcd/12"),
            Some(Ep::Edit(_, 12))
        ));
    }

    #[test]
    fn selection_matches_get_for_object_since() {
        let ids = [1, 2, 3, 4, 5];
        assert_eq!(select_ids(&ids, false, 0, false, 2), vec![5, 4]);
        assert_eq!(select_ids(&ids, false, 4, false, 2), vec![3, 2]);
        assert_eq!(select_ids(&ids, false, 4, true, 2), vec![4, 3]);
        assert_eq!(select_ids(&ids, true, 0, false, 2), vec![1, 2]);
        assert_eq!(select_ids(&ids, true, 3, false, 10), vec![4, 5]);
        assert_eq!(select_ids(&ids, true, 3, true, 10), vec![3, 4, 5]);
        assert_eq!(select_ids(&ids, true, 5, false, 10), Vec::<i64>::new());
        assert_eq!(select_ids(&ids, false, 0, false, 0).len(), 5);
    }

    #[test]
    fn php_int_cast() {
        let p = Params(
            [("a", "12abc"), ("b", "x"), ("c", "-3"), ("d", " 7 ")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        assert_eq!(p.int("a", 0), 12);
        assert_eq!(p.int("b", 5), 0);
        assert_eq!(p.int("c", 0), -3);
        assert_eq!(p.int("d", 0), 7);
        assert_eq!(p.int("missing", 9), 9);
    }
}
