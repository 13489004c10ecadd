//! `GET /admin/openapi.json`: the OpenAPI 3.1 document of the gateway's HTTP API, generated from
//! the handlers' `#[utoipa::path]` attributes (admin routes here, public ones in `crate::http`).

use std::sync::LazyLock;

use axum::Json;
use axum::http::Method;
use utoipa::OpenApi;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{self as oas, ContentBuilder, Ref, RefOr, Response, ResponseBuilder};

use super::{ErrorBody, PREFIX, agents, channels, context, conversations, schedules, tasks};

/// The security scheme of every admin operation.
pub const SECURITY_SCHEME: &str = "admin_token";

#[derive(OpenApi)]
#[openapi(
    paths(
        serve,
        tasks::list,
        tasks::detail,
        tasks::cancel,
        tasks::retry,
        tasks::usage,
        tasks::config,
        schedules::list,
        schedules::create,
        schedules::get,
        schedules::update,
        schedules::delete,
        schedules::enable,
        schedules::disable,
        schedules::run_now,
        schedules::runs,
        channels::list,
        channels::skipped,
        conversations::list,
        conversations::detail,
        conversations::messages,
        context::preview,
        agents::list,
        agents::reset,
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "tasks", description = "The durable task queue: list, inspect, cancel, retry."),
        (name = "conversations", description = "Conversations, their history and a context preview."),
        (name = "schedules", description = "Cron briefings: from the configuration or created here."),
        (name = "agents", description = "The assistants behind the gateway, their status and sessions."),
        (name = "channels", description = "Channel instances and the inbound messages they skipped."),
        (name = "gateway", description = "Usage totals, the effective configuration, this document."),
    )
)]
struct AdminApi;

#[derive(OpenApi)]
#[openapi(info(
    title = "ctxgate",
    description = "The HTTP API of the ctxgate conversation gateway.\n\n\
        Everything under `/admin` needs `Authorization: Bearer <token>`: the full token \
        (`admin.token`) for every route, the read-only token (`admin.read_only_token`) for `GET` \
        only. The admin API is off (404) until a token is configured.\n\n\
        Errors are always `{\"error\": {\"code\", \"message\"}}` with a stable snake_case code. \
        Lists page by keyset: `?limit=1..500` (default 50) and `?cursor=` from the previous \
        page's `next_cursor`, which is `null` on the last page. Times in answers are unix \
        milliseconds (UTC); time filters are RFC 3339."
))]
struct GatewayApi;

static DOCUMENT: LazyLock<oas::OpenApi> = LazyLock::new(document);

/// This document.
///
/// The OpenAPI 3.1 description of the gateway's HTTP API, generated from the code.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "gateway",
    operation_id = "openapi_document",
    responses((status = 200, description = "An OpenAPI 3.1 document", body = serde_json::Value))
)]
pub async fn serve() -> Json<&'static oas::OpenApi> {
    Json(&DOCUMENT)
}

/// The OpenAPI document: the admin routes under [`PREFIX`] with the bearer scheme and their
/// 401/403 answers, and the public routes of `crate::http`.
pub fn document() -> oas::OpenApi {
    let mut doc = GatewayApi::openapi()
        .nest(PREFIX, AdminApi::openapi())
        .merge_from(crate::http::public_openapi());
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        SECURITY_SCHEME,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The full admin token, or the read-only token for GET requests.",
                ))
                .build(),
        ),
    );
    components.responses.insert(
        "Unauthorized".into(),
        RefOr::T(error_response(
            "`unauthorized`: the `Authorization: Bearer` token is missing or wrong",
        )),
    );
    components.responses.insert(
        "ReadOnlyToken".into(),
        RefOr::T(error_response(
            "`read_only_token`: the read-only token only reads (`GET`)",
        )),
    );
    let admin = format!("{PREFIX}/");
    for (path, item) in doc.paths.paths.iter_mut() {
        if !path.starts_with(&admin) {
            continue;
        }
        for (method, op) in operations_mut(item) {
            op.security = Some(vec![SecurityRequirement::new(
                SECURITY_SCHEME,
                Vec::<String>::new(),
            )]);
            let responses = &mut op.responses.responses;
            responses.insert(
                "401".into(),
                RefOr::Ref(Ref::from_response_name("Unauthorized")),
            );
            if method != Method::GET {
                responses.insert(
                    "403".into(),
                    RefOr::Ref(Ref::from_response_name("ReadOnlyToken")),
                );
            }
        }
    }
    doc
}

/// An error answer with the [`ErrorBody`] schema.
pub fn error_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

/// The operations of a path item with their methods.
fn operations_mut(item: &mut PathItem) -> Vec<(Method, &mut Operation)> {
    [
        (Method::GET, &mut item.get),
        (Method::PUT, &mut item.put),
        (Method::POST, &mut item.post),
        (Method::DELETE, &mut item.delete),
        (Method::OPTIONS, &mut item.options),
        (Method::HEAD, &mut item.head),
        (Method::PATCH, &mut item.patch),
        (Method::TRACE, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.as_mut().map(|op| (m, op)))
    .collect()
}
