package redisstore

import (
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

// classify says whose failure err is, the error of a call whose caller is
// still waiting: quota.ErrStore when the store itself failed, so that
// every call would fail alike for a while; quota.ErrState when Redis
// answered for this request alone. An error reply proves the server is
// up, so only the replies that say it cannot serve anyone count against
// the store; any other reply (WRONGTYPE, the script's own "ERR throttle:"
// errors, a Lua error, an unknown one) and a malformed reply concern the
// request's keys.
func classify(err error) error {
	if errors.Is(err, errReply) {
		return quota.ErrState
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		// No answer: a connection error, a timeout, a closed client.
		return quota.ErrStore
	}
	if cannotServe(err) {
		return quota.ErrStore
	}
	return quota.ErrState
}

// cannotServe reports whether an error reply says that the server, or the
// cluster, cannot serve any request now, whatever its keys: it is loading
// its data, read-only (a demoted master), out of memory, unable to
// persist, busy with a script, cut off from its master or its replicas,
// out of connections, refusing our credentials, or (a cluster) down,
// resharding, or still redirecting once go-redis's redirects ran out.
func cannotServe(err error) bool {
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsOOMError(err) ||
		redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsMasterDownError(err) ||
		redis.IsNoReplicasError(err) || redis.IsMaxClientsError(err) ||
		redis.IsAuthError(err) || redis.IsPermissionError(err) ||
		redis.HasErrorPrefix(err, "BUSY ") || redis.HasErrorPrefix(err, "MISCONF ")
}
