"""Authentication and authorisation: SASL mechanisms, users, permissions.

Pure code (stdlib and ``scramp``): no I/O, no clock. Both protocol engines
use the same ``Authenticator``; see ``mechanisms`` for the exchange model.
"""

from gateway.auth.errors import PermissionRefused, AuthenticationFailed, LoginThrottled
from gateway.auth.limits import (
    AdmissionToken,
    ConnectionLimitReached,
    ConnectionRegistry,
    ListenerAdmission,
    ListenerLimitReached,
    ListenerSlots,
    UserLimits,
    VhostLimitReached,
    cap_channel_max,
)
from gateway.auth.mechanisms import (
    Authenticated,
    Authenticator,
    OfferedMechanisms,
    Challenge,
    Mechanism,
    ProtocolFamily,
    SaslExchange,
    is_loopback,
)
from gateway.auth.passwords import (StoredPassword, check_stored, hash_password, parse_stored,
                                     scram_capable, verify_password)
from gateway.auth.permissions import Action, PermissionCache, check, is_permitted, may_access_vhost
from gateway.auth.responses import (amqplain_response, common_name, parse_amqplain, parse_plain,
                                     plain_response)
from gateway.auth.throttle import LoginRefusal, LoginThrottle, log_refused_login, refuse_login
from gateway.auth.users import Permission, User, UserDirectory
from gateway.auth.vhost_admission import (VhostAccessRefused, VhostNotFound, admit_to_vhost,
                                          check_vhost_access, vhost_access_refusal)

__all__ = [
    "PermissionRefused",
    "Action",
    "PermissionCache",
    "AdmissionToken",
    "Authenticated",
    "AuthenticationFailed",
    "Authenticator",
    "Challenge",
    "ConnectionLimitReached",
    "ConnectionRegistry",
    "ListenerAdmission",
    "OfferedMechanisms",
    "ListenerLimitReached",
    "ListenerSlots",
    "LoginRefusal",
    "LoginThrottle",
    "LoginThrottled",
    "Mechanism",
    "Permission",
    "ProtocolFamily",
    "SaslExchange",
    "StoredPassword",
    "User",
    "UserDirectory",
    "UserLimits",
    "VhostLimitReached",
    "cap_channel_max",
    "check",
    "check_stored",
    "scram_capable",
    "common_name",
    "hash_password",
    "is_loopback",
    "is_permitted",
    "log_refused_login",
    "may_access_vhost",
    "VhostAccessRefused",
    "VhostNotFound",
    "admit_to_vhost",
    "check_vhost_access",
    "vhost_access_refusal",
    "amqplain_response",
    "parse_amqplain",
    "parse_plain",
    "parse_stored",
    "plain_response",
    "refuse_login",
    "verify_password",
]
