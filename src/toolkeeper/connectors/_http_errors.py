"""The errors of one HTTP tool request, mapped to toolkeeper's in one place.

httpx2 raises its own exception tree (`httpx2._exceptions`); what each becomes turns on whether
the request can have reached the service:

- a host or address the source may not reach (`AddressRefused`): `ToolFailed` with
  PERMISSION_DENIED, not retryable; nothing was sent (unless a redirect was refused: the
  request that answered with it was);
- no connection made (`ConnectError`, `ConnectTimeout`, `PoolTimeout`): `UpstreamUnavailable`,
  nothing ran;
- a request that cannot be built or sent as it is (`LocalProtocolError`, `InvalidURL`,
  `UnsupportedProtocol`): `ToolFailed` with INVALID_ARGUMENTS (an argument made it so);
- no answer in time (`ReadTimeout`, `WriteTimeout`): `TimeoutError`, which the executor takes
  as an attempt that may have run;
- too many redirects: `ToolFailed`;
- any other transport failure (`ReadError`, `RemoteProtocolError`...) or `OSError` after
  connecting: `OutcomeUnknown`, the request may have been acted on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx2

from ..core.errors import ErrorCode
from ..core.signals import OutcomeUnknown, ToolFailed
from ._http_guard import AddressRefused
from .base import UpstreamUnavailable

__all__ = ["map_http_errors"]


@contextmanager
def map_http_errors(source: str) -> Iterator[None]:
    """Raise httpx2's and the guard's errors of one request to source `source` as
    toolkeeper's, `from` the original; any other exception passes unchanged.

    Raises:
        ToolFailed: the address was refused, the request could not be built, or it was
            redirected too often.
        UpstreamUnavailable: no connection could be made (nothing sent).
        TimeoutError: no answer in time.
        OutcomeUnknown: the connection failed after the request may have been sent.
    """
    try:
        yield
    except AddressRefused as exc:
        raise ToolFailed(
            f"{source}: the request was refused: {exc.reason}",
            code=ErrorCode.PERMISSION_DENIED,
            retryable=False,
        ) from exc
    except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
        raise UpstreamUnavailable(f"{source}: could not connect ({type(exc).__name__})") from exc
    except (httpx2.LocalProtocolError, httpx2.InvalidURL, httpx2.UnsupportedProtocol) as exc:
        raise ToolFailed(  # (not quoting httpx: its words may quote a header's value)
            f"{source}: the request cannot be sent as it is (a value not allowed in a header "
            "or a URL)",
            code=ErrorCode.INVALID_ARGUMENTS,
        ) from exc
    except httpx2.TimeoutException as exc:
        raise TimeoutError(f"{source}: no answer in time ({type(exc).__name__})") from exc
    except httpx2.TooManyRedirects as exc:
        raise ToolFailed(f"{source}: too many redirects") from exc
    except (httpx2.TransportError, OSError) as exc:
        raise OutcomeUnknown(
            f"{source}: the connection failed mid-request ({type(exc).__name__})"
        ) from exc
