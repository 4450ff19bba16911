//! `Retry-After`: an S3 server that sheds load answers `503 SlowDown` or
//! `429` with how long to wait. The S3 client backs off on its own schedule
//! (exponential, with decorrelated jitter) and does not read the header, so
//! every answer passes through this service, which waits what a 429 or 503
//! asks (in seconds, at most [`MAX_WAIT`]) before handing it to the
//! client's retry: the next attempt comes no sooner than the server asked.

use std::time::Duration;

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::ClientOptions;

/// The longest `Retry-After` honoured; a longer one waits this long.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// The wait a `Retry-After` value asks for: whole seconds (the form S3
/// servers send), capped at [`MAX_WAIT`]; an HTTP date is left to the
/// client's own backoff.
pub fn retry_after(value: &str) -> Option<Duration> {
    let secs: u64 = value.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(MAX_WAIT))
}

#[derive(Debug)]
struct RetryAfter(HttpClient);

#[async_trait::async_trait]
impl HttpService for RetryAfter {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let answer = self.0.execute(req).await?;
        if matches!(answer.status().as_u16(), 429 | 503) {
            let wait = answer
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(retry_after);
            if let Some(wait) = wait {
                tokio::time::sleep(wait).await;
            }
        }
        Ok(answer)
    }
}

/// The S3 client's connector: reqwest's, with `Retry-After` honoured.
#[derive(Debug, Default)]
pub(super) struct RetryAfterConnector;

impl HttpConnector for RetryAfterConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(RetryAfter(inner)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_honoured_up_to_the_cap() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(retry_after("3600"), Some(MAX_WAIT));
        assert_eq!(retry_after("Wed, 21 Oct 2026 07:28:00 GMT"), None);
    }
}
