//! The management API's routes, each declared once: by its handler's `#[utoipa::path]` (method,
//! path, parameters, answers). [`documented!`] serves every handler it names at that method and
//! path, and gives the OpenAPI document the same operation with the schemas it names, so a
//! route can neither be served undocumented nor documented at another path than it is served.

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};
use utoipa::openapi::path::{HttpMethod, Paths};
use utoipa::openapi::{RefOr, schema::Schema};

use crate::AppState;

/// Routes with their documentation: what [`documented!`] makes of a module's handlers.
#[derive(Default)]
pub struct Documented {
    pub router: Router<AppState>,
    pub paths: Paths,
    /// The schemas the operations name (their bodies' types and what those hold).
    pub schemas: Vec<(String, RefOr<Schema>)>,
}

impl Documented {
    /// Serves `handler` as its `#[utoipa::path]` says (`P`, the attribute's path type) and
    /// documents it.
    pub fn route<P, H, T>(mut self, handler: H) -> Self
    where
        P: utoipa::Path + utoipa::__dev::SchemaReferences + for<'t> utoipa::__dev::Tags<'t>,
        H: Handler<T, AppState>,
        T: 'static,
    {
        let (path, methods) = (P::path(), P::methods());
        // `#[utoipa::path]` does not compile without a method.
        if let Some(filter) = methods.iter().map(method_filter).reduce(MethodFilter::or) {
            self.router = self.router.route(&path, on(filter, handler));
        }
        // As the `OpenApi` derive does with the handlers it lists: the operation, tagged.
        let mut operation = P::operation();
        operation
            .tags
            .get_or_insert_default()
            .extend(P::tags().into_iter().map(String::from));
        self.paths.add_path_operation(&path, methods, operation);
        P::schemas(&mut self.schemas);
        self
    }

    /// These routes and `other`'s.
    pub fn merge(mut self, other: Documented) -> Self {
        self.router = self.router.merge(other.router);
        self.paths.merge(other.paths);
        self.schemas.extend(other.schemas);
        self
    }
}

fn method_filter(method: &HttpMethod) -> MethodFilter {
    match method {
        HttpMethod::Get => MethodFilter::GET,
        HttpMethod::Post => MethodFilter::POST,
        HttpMethod::Put => MethodFilter::PUT,
        HttpMethod::Delete => MethodFilter::DELETE,
        HttpMethod::Options => MethodFilter::OPTIONS,
        HttpMethod::Head => MethodFilter::HEAD,
        HttpMethod::Patch => MethodFilter::PATCH,
        HttpMethod::Trace => MethodFilter::TRACE,
    }
}

/// The [`Documented`] routes of the handlers named (each with its `#[utoipa::path]`, in scope).
macro_rules! documented {
    ($($handler:ident),+ $(,)?) => {
        pastey::paste! {
            $crate::documented::Documented::default()
                $(.route::<[<__path_ $handler>], _, _>($handler))+
        }
    };
}

pub(crate) use documented;
