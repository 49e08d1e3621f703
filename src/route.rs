//! What happened to a request, as a closed set: the kind of each
//! outcome ([`Route`]) and its label in the metrics and the access log.
//! Each decision says which ([`crate::policy::Decision::route`]); this module
//! imports nothing of the crate, so the metrics below the decision name
//! it too.

/// What was done with a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Route {
    /// Forwarded to the upstream.
    Forward,
    /// A robot's action URL: 403.
    Block,
    /// The canonical address: 301/308.
    Redirect,
    /// The synthesized robots.txt.
    Robots,
    /// Refused before any decision (bad framing, too long, CONNECT).
    #[default]
    Reject,
    /// A robot shed under upstream pressure: 503 or 429.
    Shed,
    /// A robot answered from the robots cache.
    Cache,
    /// A file of the sitemap folder (or 404 for none).
    Sitemap,
}

impl Route {
    /// Every route, in declaration order (`route as usize` indexes it).
    pub const ALL: [Route; 8] = [
        Route::Forward,
        Route::Block,
        Route::Redirect,
        Route::Robots,
        Route::Reject,
        Route::Shed,
        Route::Cache,
        Route::Sitemap,
    ];

    /// The label: `forward`, `block`, `redirect`, `robots`, `reject`,
    /// `shed`, `cache`, `sitemap`.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Forward => "forward",
            Route::Block => "block",
            Route::Redirect => "redirect",
            Route::Robots => "robots",
            Route::Reject => "reject",
            Route::Shed => "shed",
            Route::Cache => "cache",
            Route::Sitemap => "sitemap",
        }
    }
}
