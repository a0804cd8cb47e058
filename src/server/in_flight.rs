//! Reviews in flight on the admission port, bounded in all and per client address. An HTTP/2
//! stream whose head has arrived costs about 5 KiB before its body is read: unbounded, 520
//! connections of 250 streams each held 130,000 and took the pod past its memory limit. A
//! review past a bound is refused at once (429, before its body is read), and one client
//! address cannot take every place: the API server's reviews keep theirs beside a client
//! that holds streams open. Each address also has its share of the memory for request bodies
//! ([`Place::body_share`]), so that bodies sent slowly from one address, each just under the
//! limit, cannot hold all of it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Semaphore;

/// The default bound of reviews in flight in all: 2,048 (10 MiB of stream state, besides
/// bodies, which `--body-memory-bytes` bounds). A kube-apiserver sends at most its mutating
/// requests in flight (200 by default) to a webhook at once.
pub const DEFAULT_MAX_TOTAL: usize = 2048;
/// The default bound per client address: half the total.
pub const DEFAULT_MAX_PER_CLIENT: usize = 1024;

/// Where a request came from: its connection's peer, as the accept loop saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// The places for reviews in flight.
#[derive(Debug)]
pub struct InFlightLimit {
    max_total: usize,
    max_per_client: usize,
    /// Bytes of request bodies one address may hold at once.
    body_share: usize,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    /// Places held and the body memory of each address with a review in flight.
    by_client: HashMap<IpAddr, (usize, Arc<Semaphore>)>,
}

/// Why a review found no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Every place is taken.
    #[error("the webhook has {0} reviews in flight, its most; try again")]
    Total(usize),
    /// The client's address has its share.
    #[error("this client has {0} reviews in flight, the most one address may; try again")]
    Client(usize),
}

impl Refused {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Total(_) => "in_flight",
            Refused::Client(_) => "client_in_flight",
        }
    }
}

/// A review's place, given back when dropped.
#[derive(Debug)]
pub struct Place {
    limit: Arc<InFlightLimit>,
    client: IpAddr,
    body_share: Arc<Semaphore>,
}

impl Place {
    /// The body memory of the review's address (permits are bytes), besides the memory all
    /// bodies share.
    pub fn body_share(&self) -> Arc<Semaphore> {
        self.body_share.clone()
    }
}

/// The body memory one address may hold: half of what all bodies share (the API server sends
/// every review from its own address: half of 64 MiB is a thousand reviews of 32 KiB, or
/// four of the largest), at least one body of the largest size.
pub fn body_share(body_memory: usize, max_body: usize) -> usize {
    (body_memory / 2).max(max_body)
}

impl InFlightLimit {
    /// Bounds of `max_total` in all and `max_per_client` per address (each at least 1), and
    /// `body_share` bytes of request bodies per address.
    pub fn new(max_total: usize, max_per_client: usize, body_share: usize) -> Arc<Self> {
        Arc::new(InFlightLimit {
            max_total: max_total.max(1),
            max_per_client: max_per_client.max(1),
            body_share: body_share.min(Semaphore::MAX_PERMITS),
            counts: Mutex::default(),
        })
    }

    /// A place for a review from `client`, if one is free.
    pub fn enter(self: &Arc<Self>, client: IpAddr) -> Result<Place, Refused> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.total >= self.max_total {
            return Err(Refused::Total(self.max_total));
        }
        let (held, body_share) = counts
            .by_client
            .entry(client)
            .or_insert_with(|| (0, Arc::new(Semaphore::new(self.body_share))));
        if *held >= self.max_per_client {
            return Err(Refused::Client(self.max_per_client));
        }
        *held += 1;
        let body_share = body_share.clone();
        counts.total += 1;
        Ok(Place {
            limit: self.clone(),
            client,
            body_share,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self
            .limit
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some((held, _)) = counts.by_client.get_mut(&self.client) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                counts.by_client.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_in_all_and_per_address() {
        let limit = InFlightLimit::new(3, 2, 100);
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let a1 = limit.enter(a).expect("a1");
        let a2 = limit.enter(a).expect("a2");
        // One share of body memory per address, shared by its reviews.
        assert!(Arc::ptr_eq(&a1.body_share(), &a2.body_share()));
        assert_eq!(a1.body_share().available_permits(), 100);
        assert_eq!(limit.enter(a).unwrap_err(), Refused::Client(2));
        let b1 = limit.enter(b).expect("b1");
        assert!(!Arc::ptr_eq(&a1.body_share(), &b1.body_share()));
        assert_eq!(limit.enter(b).unwrap_err(), Refused::Total(3));
        drop(a1);
        let b2 = limit.enter(b).expect("a place given back");
        drop((a2, b1, b2));
        let counts = limit.counts.lock().expect("lock");
        assert_eq!((counts.total, counts.by_client.len()), (0, 0));
        assert_eq!(
            Refused::Client(1024).to_string(),
            "this client has 1024 reviews in flight, the most one address may; try again"
        );
    }

    #[test]
    fn a_share_is_half_and_at_least_one_body() {
        assert_eq!(body_share(64 << 20, 8 << 20), 32 << 20);
        assert_eq!(body_share(256 << 10, 64 << 10), 128 << 10);
        assert_eq!(body_share(8 << 20, 8 << 20), 8 << 20);
    }
}
