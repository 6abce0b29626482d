
2.0
warrantv0.1.0B©…
;/api/v1/namespaces/{namespace}/serviceaccounts/{name}/tokenâ"Ü
core_v1%Issues a token for a service account.*)createCoreV1NamespacedServiceAccountToken2application/json:application/json:application/yaml:#application/vnd.kubernetes.protobufBM
K
Ibodybody *9
7#/definitions/io.k8s.api.authentication.v1.TokenRequestJj
O
201H
F
Created;
9
7#/definitions/io.k8s.api.authentication.v1.TokenRequest

401

UnauthorizedRhttpsj
x-kubernetes-action"post"jk
x-kubernetes-group-version-kindHF{"group":"authentication.k8s.io","kind":"TokenRequest","version":"v1"}J9
75"3pathThe service account's name."name*stringJC
A?"=path The service account's namespace."	namespace*string£
+/apis/authentication.k8s.io/v1/tokenreviewsÛ"
authentication_v1Reviews a token.*!createAuthenticationV1TokenReview2application/json:application/json:application/yaml:#application/vnd.kubernetes.protobufBL
J
Hbodybody *8
6#/definitions/io.k8s.api.authentication.v1.TokenReviewJi
N
201G
E
Created:
8
6#/definitions/io.k8s.api.authentication.v1.TokenReview

401

UnauthorizedRhttpsj
x-kubernetes-action"post"jj
x-kubernetes-group-version-kindGE{"group":"authentication.k8s.io","kind":"TokenReview","version":"v1"}Ù
N/apis/warrant.dev/v1alpha1/namespaces/{namespace}/serviceaccounts/{name}/token°"û
warrantDev_v1alpha1%Issues a token for a service account.*5createWarrantDevV1alpha1NamespacedServiceAccountToken2application/json:application/json:application/yaml:#application/vnd.kubernetes.protobufBM
K
Ibodybody *9
7#/definitions/io.k8s.api.authentication.v1.TokenRequestJj
O
201H
F
Created;
9
7#/definitions/io.k8s.api.authentication.v1.TokenRequest

401

UnauthorizedRhttpsj
x-kubernetes-action"post"jk
x-kubernetes-group-version-kindHF{"group":"authentication.k8s.io","kind":"TokenRequest","version":"v1"}J9
75"3pathThe service account's name."name*stringJC
A?"=path The service account's namespace."	namespace*stringΩ
'/apis/warrant.dev/v1alpha1/tokenreviewsë"é
warrantDev_v1alpha1>Reviews a token, with the proof of its key if it is key-bound.*#createWarrantDevV1alpha1TokenReview2application/json:application/json:application/yaml:#application/vnd.kubernetes.protobufBD
B
@bodybody *0
.#/definitions/dev.warrant.v1alpha1.TokenReviewJa
F
201?
=
Created2
0
.#/definitions/dev.warrant.v1alpha1.TokenReview

401

UnauthorizedRhttpsj
x-kubernetes-action"post"jf
x-kubernetes-group-version-kindCA{"group":"warrant.dev","kind":"TokenReview","version":"v1alpha1"}JïV
Æ
dev.warrant.v1alpha1.DPoPProofã"≤A DPoP proof as the relying party received it. Its htm and htu must name the relying party's request, its ath the token, its key the token's cnf.jkt; each proof is accepted once.öproofömethodöuri≤
object ∞
W
methodM"@The HTTP method of the request the proof came with, such as GET.≤
string
R
proofI"<The DPoP header's value: the proof JWT (at most 8192 bytes).≤
string
Ä
uriy"lThe absolute https URI of the request the proof came with, as the client addressed it; the query is ignored.≤
string
∂
dev.warrant.v1alpha1.KeyBindingí"!The key binding a review checked.ömethodö
thumbprint≤
object  
q
methodg"ZDPoP (a DPoP proof of the key) or ClientCertificate (the client certificate's thumbprint).≤
string
U

thumbprintG":The token's cnf.jkt or cnf.x5t#S256: the key's thumbprint.≤
string
∏
 dev.warrant.v1alpha1.TokenReviewì"ïAsks whether a token is valid and whom it stands for, as authentication.k8s.io's TokenReview does, and takes the proof of the key a key-bound token (cnf) is bound to: the DPoP proof that came with it, or the thumbprint of the client certificate it came over. Nothing is stored.öspec≤
object ˙
g

apiVersionY"LThe API version of this object. The answer is in the version of the request.≤
string
#
kind"`TokenReview`.≤
string
¥
metadataß
=#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"fStandard object metadata. TokenReviews are not stored: the answer carries the metadata of the request.
M
specE
2#/definitions/dev.warrant.v1alpha1.TokenReviewSpec"What to review.
d
statusZ
4#/definitions/dev.warrant.v1alpha1.TokenReviewStatus""The verdict, filled in by warrant.˙h
x-kubernetes-group-version-kindEC[{"group":"warrant.dev","kind":"TokenReview","version":"v1alpha1"}]
Ω
$dev.warrant.v1alpha1.TokenReviewSpecî"êA token, the audiences it should be valid for, and, for a key-bound token, the proof of its key (at most one of dpop and certificateThumbprint).ötoken≤
object Í
Ø
	audiences°"ÑThe audiences the caller accepts; the token must be meant for at least one. Empty means warrant's API audiences (`--api-audiences`).≤
array∫
≤
string
ô
certificateThumbprintˇ"ÒFor a token bound to a client certificate (cnf.x5t#S256): the RFC 8705 thumbprint of the certificate the client's TLS connection presented, the unpadded base64url SHA-256 of its DER. Given for a token that is not key-bound, the review fails.≤
string
‚
dpopŸ
,#/definitions/dev.warrant.v1alpha1.DPoPProof"®The DPoP proof (RFC 9449) that came with a token bound to a DPoP key (cnf.jkt), and the request it came with. Given for a token that is not key-bound, the review fails.
5
token,"The bearer token, as presented.≤
string
¬
&dev.warrant.v1alpha1.TokenReviewStatusó"cThe verdict on a token: whether it is valid, whom it stands for, and which key binding was checked.≤
object £
õ
	audiencesç"qThe requested audiences the token is valid for. A caller that sent audiences should check that this is not empty.≤
array∫
≤
string
<
authenticated+"True when the token is valid.≤	
boolean
L
errorC"6Why the token is not valid, in kube-apiserver's words.≤
string
{

keyBindingm
-#/definitions/dev.warrant.v1alpha1.KeyBinding"<Set when a key-bound token passed with the proof of its key.
z
userr
3#/definitions/io.k8s.api.authentication.v1.UserInfo";The service account the token stands for, when it is valid.
•
1io.k8s.api.authentication.v1.BoundObjectReferenceÔ"2A pod, secret or node, by name and optionally UID.≤
object ¨
W

apiVersionI"<The object's API version; `v1` (only its group is compared).≤
string
/
kind'"`Pod`, `Secret` or `Node`.≤
string
`
nameX"KThe object's name; pods and secrets are in the service account's namespace.≤
string
>
uid7"*The object's UID; if given, it must match.≤
string
ˆ
)io.k8s.api.authentication.v1.TokenRequest»"éAsks warrant to issue a token for a service account, optionally bound to a pod, secret or node. Nothing is stored: the token is in the answer.≤
object ∏
{

apiVersionm"`The API version of this object: `authentication.k8s.io/v1`, whichever group's URL it is sent to.≤
string
$
kind"`TokenRequest`.≤
string
«
metadata∫
=#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"yStandard object metadata. TokenRequests are not stored: the answer carries the service account's name, namespace and UID.
U
specM
;#/definitions/io.k8s.api.authentication.v1.TokenRequestSpec"What to issue.
r
statush
=#/definitions/io.k8s.api.authentication.v1.TokenRequestStatus"'The issued token, filled in by warrant.˙m
x-kubernetes-group-version-kindJH[{"group":"authentication.k8s.io","kind":"TokenRequest","version":"v1"}]
¯
-io.k8s.api.authentication.v1.TokenRequestSpec∆"8The audiences, lifetime and binding of a token to issue.≤
object ˝
Å
	audiencest"XWho the token is for. Empty or absent means warrant's API audiences (`--api-audiences`).≤
array∫
≤
string
©
boundObjectRefñ
?#/definitions/io.k8s.api.authentication.v1.BoundObjectReference"SThe object the token is bound to: it stops being valid when that object is deleted.
 
expirationSeconds¥int64"ûHow long the token should be valid, in seconds: at least 600, 3600 if absent. It may be shortened to `--service-account-max-token-expiration`, with a warning.≤	
integer
¶
/io.k8s.api.authentication.v1.TokenRequestStatusÚ"The issued token.≤
object –
¶
expirationTimestampé
7#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"SWhen the token expires, as requested (an extended token's own expiry may be later).
%
token"The signed JWT.≤
string
à
(io.k8s.api.authentication.v1.TokenReview€"…Asks whether a bearer token is valid and whom it stands for. warrant checks the signature, issuer, audiences and times, and that the service account and any bound object still exist with the same UID. A token bound to a key (cnf) is refused here: this review cannot carry the proof; warrant.dev/v1alpha1's can. Nothing is stored.öspec≤
object ä
g

apiVersionY"LThe API version of this object. The answer is in the version of the request.≤
string
#
kind"`TokenReview`.≤
string
¥
metadataß
=#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"fStandard object metadata. TokenReviews are not stored: the answer carries the metadata of the request.
U
specM
:#/definitions/io.k8s.api.authentication.v1.TokenReviewSpec"What to review.
l
statusb
<#/definitions/io.k8s.api.authentication.v1.TokenReviewStatus""The verdict, filled in by warrant.˙l
x-kubernetes-group-version-kindIG[{"group":"authentication.k8s.io","kind":"TokenReview","version":"v1"}]
Â
,io.k8s.api.authentication.v1.TokenReviewSpec¥"2A token, and the audiences it should be valid for.ötoken≤
object È
Ø
	audiences°"ÑThe audiences the caller accepts; the token must be meant for at least one. Empty means warrant's API audiences (`--api-audiences`).≤
array∫
≤
string
5
token,"The bearer token, as presented.≤
string
Æ
.io.k8s.api.authentication.v1.TokenReviewStatus˚"DThe verdict on a token: whether it is valid, and whom it stands for.≤
object ¶
õ
	audiencesç"qThe requested audiences the token is valid for. A caller that sent audiences should check that this is not empty.≤
array∫
≤
string
<
authenticated+"True when the token is valid.≤	
boolean
L
errorC"6Why the token is not valid, in kube-apiserver's words.≤
string
z
userr
3#/definitions/io.k8s.api.authentication.v1.UserInfo";The service account the token stands for, when it is valid.
∞
%io.k8s.api.authentication.v1.UserInfoÜ")A user, as an authenticator describes it.≤
object Ã
u
extral"@What else the token says: the bound pod, node and credential ID.™
≤
array∫
≤
string≤
object
]
groupsS"7The service account groups, and `system:authenticated`.≤
array∫
≤
string
.
uid'"The service account's UID.≤
string
D
username8"+`system:serviceaccount:<namespace>:<name>`.≤
string
o
-io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1>"1A set of fields, in the server-side apply format.≤
object
Ÿ
7io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntryù"The fields one manager owns.≤
object 
C

apiVersion5"(The version the field set is written in.≤
string
7

fieldsType)"The format of the field set.≤
string
Y
fieldsV1M
;#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"The field set.
/
manager$"Who manages the fields.≤
string
;
	operation."!How the fields were last written.≤
string
F
subresource7"*The subresource they were written through.≤
string
_
timeW
7#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"When they were last written.
Æ
/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta˙"~Kubernetes object metadata. warrant reads the name, namespace and UID where the API gives them a meaning, and echoes the rest.≤
object Î

F
annotations7"Free-form string metadata.™
≤
string≤
object

creationTimestampj
7#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"/When the object was created; set by the server.
l
deletionGracePeriodSecondsNint64"9Seconds allowed for graceful deletion; set by the server.≤	
integer
É
deletionTimestampn
7#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"3When the object will be deleted; set by the server.
b

finalizersT"8Conditions that must clear before the object is deleted.≤
array∫
≤
string
V
generateNameF"9A prefix for a generated name, used when `name` is empty.≤
string
Z

generationLint64"7The generation of the desired state; set by the server.≤	
integer
T
labelsJ"-String keys and values for selecting objects.™
≤
string≤
object
§
managedFieldsí":Which manager owns which fields; maintained by the server.≤
array∫I
G
E#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry
'
name"The object's name.≤
string
1
	namespace$"The object's namespace.≤
string
á
ownerReferencest" The objects this one depends on.≤
array∫E
C
A#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference
S
resourceVersion@"3An opaque version of the object; set by the server.≤
string
/
selfLink#"Deprecated and unused.≤
string
+
uid$"The object's unique ID.≤
string
‚
3io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference™"$An object another object depends on.ö
apiVersionökindönameöuid≤
object ‘
3

apiVersion%"The owner's API version.≤
string
\
blockOwnerDeletionF"8True if the owner may not be deleted before this object.≤	
boolean
I

controller;"-True if the owner is the managing controller.≤	
boolean
&
kind"The owner's kind.≤
string
&
name"The owner's name.≤
string
$
uid"The owner's UID.≤
string
j
)io.k8s.apimachinery.pkg.apis.meta.v1.Time=	date-time"%An RFC 3339 timestamp, to the second.≤
string