//! The stand-in kubelet's port, held for the node's whole life.
//!
//! A real kubelet listens on 10250, outside the range the kernel hands out for outgoing
//! connections. A stand-in's port comes from that range (many kubelets share one
//! machine), so while it is down (between a stop and the next start) any process's
//! outgoing connection could take the port, and the next start would fail with
//! "address already in use" for a reason that has nothing to do with its config. The
//! reservation closes that gap: a socket bound to the port, never listening, lives as
//! long as the node. The kernel neither hands a bound port to another socket nor
//! accepts connections on a socket that does not listen, so while the stand-in is down
//! a probe is refused, as it is on a real node. The serving listener binds the same port
//! beside it (`SO_REUSEPORT`, which only sockets of this process set) while it runs.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};

/// A port on 127.0.0.1 bound for as long as this lives; see the module docs.
#[derive(Debug)]
pub struct ReservedPort {
    _socket: Socket,
    port: u16,
}

/// A socket on 127.0.0.1:`port` that shares it only with this process's other sockets
/// on it (`SO_REUSEPORT`). The listener also sets `SO_REUSEADDR` so that its earlier
/// connections in TIME_WAIT do not hold the port; the reservation does not, since a
/// socket that sets it may bind beside another that sets it and does not listen.
fn socket_for(port: u16, reuse_address: bool) -> io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(reuse_address)?;
    socket.set_reuse_port(true)?;
    socket.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)).into())?;
    Ok(socket)
}

impl ReservedPort {
    /// Reserves `port` on 127.0.0.1; 0 reserves a free one the kernel picks.
    pub fn reserve(port: u16) -> io::Result<ReservedPort> {
        let socket = socket_for(port, false)?;
        let port = socket
            .local_addr()?
            .as_socket()
            .map(|a| a.port())
            .ok_or_else(|| io::Error::other("the reserved socket has no IP address"))?;
        Ok(ReservedPort {
            _socket: socket,
            port,
        })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A listener on the reserved port, for as long as the kubelet runs. Must be called
    /// within a tokio runtime.
    pub fn listen(&self) -> io::Result<tokio::net::TcpListener> {
        let socket = socket_for(self.port, true)?;
        socket.listen(1024)?;
        socket.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(socket.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reserved_port_refuses_connections_keeps_others_off_and_serves_when_listening() {
        let reserved = ReservedPort::reserve(0).unwrap();
        let port = reserved.port();
        assert_ne!(port, 0);

        // Not listening: a connection is refused, as on a node whose kubelet is down.
        let refused = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        // Nothing else can take the port meanwhile, not even a socket that sets
        // SO_REUSEADDR as std's listener does.
        let taken = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap_err();
        assert_eq!(taken.kind(), io::ErrorKind::AddrInUse);

        // Listening, stopping and listening again, as across a restart.
        for _ in 0..2 {
            let listener = reserved.listen().unwrap();
            let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            accept.await.unwrap().unwrap();
            let refused = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        }

        // Released with the reservation.
        drop(reserved);
        std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    }
}
