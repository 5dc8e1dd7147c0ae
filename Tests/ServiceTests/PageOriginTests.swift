import Testing
@testable import Service

/// The origins a browser sends for the dashboard page, derived from the operations
/// listener's configured address and bound port only (docs/security/SECURITY.md, invariant 77).
@Suite struct PageOriginTests {
    @Test func loopbackListenersAreAlsoLocalhost() {
        #expect(Server.pageOrigins(host: "127.0.0.1", port: 9100) == ["http://127.0.0.1:9100", "http://localhost:9100"])
        #expect(Server.pageOrigins(host: "::1", port: 9100) == ["http://[::1]:9100", "http://localhost:9100"])
        #expect(Server.pageOrigins(host: "localhost", port: 9100)
            == ["http://localhost:9100", "http://127.0.0.1:9100", "http://[::1]:9100"])
    }

    @Test func anotherLoopbackAddressIsOnlyItself() {
        #expect(Server.pageOrigins(host: "127.0.0.2", port: 9100) == ["http://127.0.0.2:9100"])
    }

    @Test func aNamedOrAddressedListenerIsExactlyThatOrigin() {
        #expect(Server.pageOrigins(host: "Dash.Example", port: 8080) == ["http://dash.example:8080"])
        #expect(Server.pageOrigins(host: "10.1.2.3", port: 8080) == ["http://10.1.2.3:8080"])
        #expect(Server.pageOrigins(host: "2001:db8::5", port: 8080) == ["http://[2001:db8::5]:8080"])
    }

    @Test func everyAddressIsKnownOnlyByItsLoopbackForms() {
        #expect(Server.pageOrigins(host: "0.0.0.0", port: 8080) == ["http://localhost:8080", "http://127.0.0.1:8080"])
        #expect(Server.pageOrigins(host: "::", port: 8080)
            == ["http://localhost:8080", "http://127.0.0.1:8080", "http://[::1]:8080"])
    }

    @Test func port80IsLeftOutAsBrowsersDo() {
        #expect(Server.pageOrigins(host: "dash.example", port: 80) == ["http://dash.example"])
    }
}
