//! What operators paste into `explain` beyond the codes themselves, and the entry that must
//! come first: Chinese phrasings of every code in the tables of the TKE Ingress controller
//! handbook (000) and the CCE container network handbook (004), and the registry errors
//! (the OCI distribution spec's error codes) as kubelet, dockerd, containerd and CRI-O print
//! them in a failed pull.
//!
//! The pastes are kept here, not read from `../shared/docs` at test time: a clone without the
//! handbooks runs every case. Only the check that the handbook-worded cases really are the
//! handbook's words needs the documents, and skips without them.

use std::collections::BTreeSet;

use collectors::explain::{self, lookup, Confidence};

/// Where a Chinese phrasing comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Src {
    /// The handbook's own wording of the symptom (a heading, 故障原因, 详细描述, 解释, 触发条件),
    /// as copied from the document; checked to occur there.
    Handbook,
    /// How an operator describes the symptom in their own words.
    Operator,
}
use Src::{Handbook, Operator};

/// `(code, from, paste)`: the 000 entry listing `code` must come first, confidently. E4038
/// names the certificate-type entry; the out-of-date one (E4038 / E4039) is named E4039.
const ZH_000: &[(&str, Src, &str)] = &[
    ("E4000", Handbook, "接口调用出现短时间内出现超频情况，错误会重试。少量出现对服务没有影响。"),
    ("E4000", Operator, "Ingress 创建负载均衡时接口调用超频了"),
    ("E4003", Handbook, "故障原因: 负载均衡资源数量受限。"),
    ("E4003", Operator, "Ingress 创建不了 CLB，负载均衡实例数量达到上限"),
    ("E4004", Handbook, "故障原因: 负载均衡资源下的监听器数量受限。"),
    ("E4004", Operator, "CLB 上的监听器数量达到上限了"),
    ("E4005", Handbook, "故障原因: 负载均衡资源下的规则数量受限。"),
    ("E4005", Operator, "负载均衡的转发规则数量超过上限"),
    ("E4006", Handbook, "故障原因: 在 Ingress 管理的监听器下面设置了重定向规则，导致监听器删除失败。"),
    ("E4006", Operator, "监听器上配了重定向，Ingress 删除监听器失败"),
    ("E4007", Handbook, "故障原因: 绝大部分的情况是修改了 `ip-masq-agent-config`，导致访问 Norm 的请求没有进行 IP 伪装，导致 Norm 的鉴权未通过。"),
    ("E4007", Operator, "改了 ip-masq-agent 的配置以后 Norm 鉴权不通过"),
    ("E4008", Handbook, "故障原因: 撤销了对于腾讯云容器服务的授权，导致服务无法运行"),
    ("E4008", Operator, "Ingress 报错，容器服务的授权被撤销了"),
    ("E4009", Handbook, "故障原因: Ingress模板格式错误。spec.tls.secretName 没有填写或为空"),
    ("E4009", Operator, "Ingress 的 tls 没有填 secretName"),
    ("E4010", Handbook, "故障原因: Ingress模板信息错误。spec.tls.secretName 中填写的Secrets资源不存在"),
    ("E4010", Operator, "Ingress TLS 引用的 Secret 不存在"),
    ("E4011", Handbook, "故障原因: Ingress模板中引用的Secrets内容缺失。或引用的Secrets需要包含qcloud_cert_id字段信息"),
    ("E4011", Operator, "证书 Secret 里没有 qcloud_cert_id 字段"),
    ("E4012", Handbook, "故障原因: 大概率是Ingress模板信息错误。spec.tls.secretName中指定的Secrets资源中描述的qcloud_cert_id不存在。"),
    ("E4012", Operator, "创建监听器报 Query certificate 'abc123' failed，证书ID填写错误"),
    ("E4013", Handbook, "故障原因: Ingress模板不正确，spec.rules.http没有填写实际内容"),
    ("E4013", Operator, "Ingress 规则里 spec.rules.http 是空的"),
    ("E4017", Handbook, "负载均衡的标签存在篡改"),
    ("E4017", Handbook, "故障原因：修改了负载均衡的标签，导致根据标签定位负载均衡资源失败。"),
    ("E4017", Operator, "有人改了 CLB 的标签，Ingress 找不到负载均衡了"),
    ("E4018", Handbook, "kubernetes.io/ingress.existLbId 中指定的LB资源不存在"),
    ("E4018", Handbook, "故障原因: Ingress模板不正确，Annotation `kubernetes.io/ingress.existLbId` 中指定的LoadBalance不存在"),
    ("E4018", Operator, "existLbId 里填的 CLB 不存在"),
    ("E4019", Handbook, "故障原因: kubernetes.io/ingress.existLbId中指定的LBId已经被Ingress或是Service使用（资源生命周期由TKE集群管理），不能重复使用"),
    ("E4019", Operator, "existLbId 指定的 LB 是 TKE 自动创建的，不能重复使用"),
    ("E4020", Handbook, "故障原因: `kubernetes.io/ingress.existLbId` 中指定的LBId已经被Ingress使用，不能重复使用"),
    ("E4020", Operator, "使用已有 LB 报错，这个 LB 已经被别的 Ingress 使用了"),
    ("E4021", Handbook, "故障原因: `kubernetes.io/ingress.existLbId` 中指定的LBId中还有监听器没有删除。"),
    ("E4021", Handbook, "详细描述: 使用已有LB时，如果LB上存在监听器，可能造成LB资源的误操作。所以禁用还存在监听器的存量监听器。"),
    ("E4021", Operator, "使用已有 CLB 失败，LB 上还有监听器"),
    ("E4022", Handbook, "故障原因: kubernetes.io/ingress.http-rules 标签的格式解析错误"),
    ("E4022", Operator, "http-rules 注解的 JSON 格式写错了"),
    ("E4023", Handbook, "故障原因: kubernetes.io/ingress.https-rules 标签的格式解析错误"),
    ("E4023", Operator, "https-rules 注解格式不对"),
    ("E4024", Handbook, "故障原因: 创建Ingress LB时，通过注解配置的参数有错误。"),
    ("E4024", Operator, "创建 Ingress 的 CLB 时注解参数不合法"),
    ("E4025", Handbook, "故障原因: 创建Ingress LB时，资源不足。"),
    ("E4025", Handbook, "详细描述: 通常是内网型LB的子网IP数量不足"),
    ("E4025", Operator, "Ingress 创建内网 LB 提示资源不足"),
    ("E4026", Handbook, "故障原因: 创建Ingress LB时，kubernetes.io/ingress.extensiveParameters 标签的格式解析错误"),
    ("E4026", Operator, "extensiveParameters 注解不是合法的 JSON"),
    ("E4027", Handbook, "故障原因: 账户欠费"),
    ("E4027", Operator, "腾讯云账号欠费了，Ingress 建不了负载均衡"),
    ("E4030", Handbook, "故障原因: 通过使用已有LB的方式，使用传统型CLB无法创建七层规则"),
    ("E4030", Operator, "传统型 CLB 不支持七层转发规则"),
    ("E4031", Handbook, "故障原因: 模板中填写的七层规则，Path的格式不符合规则"),
    ("E4031", Operator, "Ingress 的 path 格式不对，没有以 / 开头"),
    ("E4032", Handbook, "故障原因: 使用了错误的 `AddressIPVersion` 参数"),
    ("E4032", Handbook, "详细描述: 目前基于IPv4网络的集群只支持，IPv4和NAT IPv6类型的负载均衡。不支持纯IPv6类型的负载均衡。"),
    ("E4032", Operator, "IPv4 集群的 Ingress 不能用纯 IPv6 的 CLB"),
    ("E4033", Handbook, "故障原因: 该地域不支持IPv6类型的负载均衡。"),
    ("E4033", Operator, "这个地域不支持 IPv6 负载均衡"),
    ("E4034", Handbook, "故障原因: Ingress规则中没有配置Host"),
    ("E4034", Operator, "纯 IPv6 的 LB，Ingress 规则没配 host"),
    ("E4035", Handbook, "故障原因: 证书ID格式不正确。（CertId长度不正确）"),
    ("E4035", Operator, "Secret 里的证书 ID 长度不对"),
    ("E4036", Handbook, "故障原因: 证书ID不存在。"),
    ("E4036", Operator, "Ingress 用的证书 ID 在 SSL 控制台找不到"),
    ("E4037", Handbook, "故障原因: ingress.cloud.tencent.com/direct-access的合法值是 true 或 false"),
    ("E4037", Operator, "direct-access 注解的值不合法"),
    ("E4038", Handbook, "故障原因: 配置的证书类型，需要是服务端证书。不能使用客户端证书配置单向证书。"),
    ("E4038", Operator, "Ingress 配了客户端证书，证书类型错误"),
    ("E4039", Handbook, "故障原因: 配置的证书过期了，检查配置的证书的过期时间。"),
    ("E4039", Operator, "Ingress 的 HTTPS 证书过期了"),
    ("E4040", Handbook, "故障原因: Ingress中描述的域名，存在一个或多个没有包含在TLS的域名证书规则中。"),
    ("E4040", Operator, "Ingress 里有个域名没有配置对应的证书"),
    ("E4041", Handbook, "故障原因: Ingress中引用的Service不存在"),
    ("E4041", Operator, "Ingress 后端的 Service 不存在"),
    ("E4042", Handbook, "故障原因: Ingress中引用的Service端口不存在"),
    ("E4042", Operator, "Ingress 引用的 Service 端口不存在"),
    ("E4043", Handbook, "故障原因: Ingress通过\"ingress.cloud.tencent.com/tke-service-config\"注解引用的TkeServiceConfig资源不存在"),
    ("E4043", Operator, "Ingress 引用的 TkeServiceConfig 不存在"),
    ("E4044", Handbook, "故障原因: Ingress的注解\"kubernetes.io/ingress.rule-mix\"不是一个合法的JSON字符串。"),
    ("E4044", Operator, "混合协议的 rule-mix 注解格式错误"),
    ("E4045", Handbook, "故障原因: Ingress的注解\"kubernetes.io/ingress.internetChargeType\"内容不合法。"),
    ("E4045", Operator, "internetChargeType 计费类型填错了"),
    ("E4046", Handbook, "故障原因: Ingress的注解\"kubernetes.io/ingress.internetMaxBandwidthOut\"内容不合法。"),
    ("E4046", Operator, "internetMaxBandwidthOut 带宽填得不对"),
    ("E4047", Handbook, "故障原因: 作为Ingress后端引用的Service，类型只能是NodePort或LoadBalancer。"),
    ("E4047", Operator, "Ingress 后端 Service 用的是 ClusterIP 类型"),
    ("E4048", Handbook, "故障原因: Ingress中，TLS声明了多个默认证书，出现冲突"),
    ("E4048", Operator, "TLS 里配了两个默认证书，冲突了"),
    ("E4049", Handbook, "故障原因: Ingress中，TLS声明了多个证书对应同一个域名，出现冲突"),
    ("E4049", Operator, "同一个域名配了多个证书"),
    ("E4050", Handbook, "故障原因: ingress.cloud.tencent.com/tke-service-config-auto的合法值是 true 或 false"),
    ("E4050", Operator, "tke-service-config-auto 注解只能填 true 或 false"),
    ("E4051", Handbook, "故障原因: ingress.cloud.tencent.com/tke-service-config的名称不能以 '-auto-ingress-config' or '-auto-service-config' 为后缀。会和自动同步的配置名称出现冲突。"),
    ("E4051", Operator, "TkeServiceConfig 的名字不能以 -auto-ingress-config 结尾"),
    ("E4052", Handbook, "故障原因: 根据K8S的限制，Ingress的Host需要满足正则表达式"),
    ("E4052", Operator, "Ingress 的 host 域名不合法，包含特殊字符"),
    ("E4053", Handbook, "故障原因: 负载均衡所在子网的IP已经用光，无法在配置的子网下创建负载均衡。"),
    ("E4053", Operator, "Ingress 的 CLB 所在子网 IP 用光了"),
    ("E4091", Handbook, "故障原因: 创建内网型LB时指定的子网不正确。"),
    ("E4091", Operator, "内网 LB 指定的子网不存在"),
    ("E5003", Handbook, "故障原因: CLB内部错误"),
    ("E5003", Operator, "Ingress 同步时报负载均衡内部错误"),
    ("E5004", Handbook, "故障原因: CVM内部错误"),
    ("E5004", Operator, "调用 CVM 接口返回内部错误"),
    ("E5005", Handbook, "故障原因: 标签服务内部错误"),
    ("E5005", Operator, "TAG 标签服务出错了"),
    ("E5007", Operator, "Norm 服务内部错误"),
    ("E5008", Operator, "TKE 服务内部错误"),
    ("E5009", Handbook, "故障原因: CLB内部错误, 后端批量绑定、解绑出现部分错误"),
    ("E5009", Operator, "CLB 批量绑定后端失败"),
    ("E6001", Handbook, "故障原因: 集群资源 configmap tke-config 配置缺失，导致容器启动失败"),
    ("E6001", Operator, "kube-system 下的 tke-config 不存在，l7-lb-controller 起不来"),
    ("E6006", Handbook, "故障原因 A: CoreDNS对相关API服务的域名解析出现错误"),
    ("E6006", Operator, "l7-lb-controller 访问 clb.internal.tencentcloudapi.com 超时"),
    ("E6007", Handbook, "故障原因: Ingress 内部错误"),
    ("E6007", Operator, "Ingress 控制器内部错误"),
    ("W1000", Handbook, "告警原因: 指定的Service不存在，Ingress规则无法找到对应绑定的后端。"),
    ("W1000", Operator, "Ingress 规则找不到对应的后端 Service"),
    ("W1001", Handbook, "告警原因: 删除Ingress的时候，Ingress使用的负载均衡没有被删除"),
    ("W1001", Handbook, "详细描述: Ingress使用的负载均衡资源没有tke-createdBy-flag=yes的标签，生命周期没有在Ingress的管理之下。需要自行手动删除。"),
    ("W1001", Operator, "删了 Ingress，但是 CLB 没有被删掉"),
    ("W1002", Handbook, "告警原因: 删除Ingress的时候，Ingress使用的负载均衡下的监听器没有被删除"),
    ("W1002", Handbook, "详细描述: Ingress使用的负载均衡资源下的监听器名称不是TKE-DEDICATED-LISTENER，该监听器不是Ingress创建的或是被修改，生命周期没有在Ingress的管理之下。需要自行手动删除。"),
    ("W1002", Operator, "删除 Ingress 以后负载均衡下的监听器没删除"),
    // More operator phrasings, one or two words away from the ones above.
    ("E4003", Operator, "负载均衡数量超过了上限"),
    ("E4004", Operator, "监听器个数达到上限"),
    ("E4005", Operator, "CLB 规则条数超限了"),
    ("E4006", Operator, "监听器有重定向规则删不掉"),
    ("E4007", Operator, "Norm 鉴权失败，ip-masq-agent 配置被改过"),
    ("E4008", Operator, "TKE_QCSRole 授权被删了"),
    ("E4009", Operator, "ingress tls 的 secretName 是空的"),
    ("E4010", Operator, "tls 配置的 secret 找不到"),
    ("E4011", Operator, "secret 中缺少 qcloud_cert_id"),
    ("E4013", Operator, "ingress 的 rules.http 为空"),
    ("E4017", Operator, "CLB 的标签被删了"),
    ("E4018", Operator, "existLbId 指定的负载均衡找不到"),
    ("E4020", Operator, "这个 CLB 已经被其他 ingress 占用了"),
    ("E4021", Operator, "复用的 CLB 上面还有监听器"),
    ("E4022", Operator, "http-rules 注解解析失败"),
    ("E4026", Operator, "extensiveParameters 解析失败"),
    ("E4027", Operator, "账户欠费导致ingress创建负载均衡失败"),
    ("E4031", Operator, "ingress 路径格式不合法"),
    ("E4033", Operator, "当前地域不支持 IPv6 的 CLB"),
    ("E4034", Operator, "ingress 规则没有填 host"),
    ("E4035", Operator, "证书 ID 格式不对"),
    ("E4036", Operator, "证书 ID 不存在"),
    ("E4039", Operator, "ingress证书已经过期"),
    ("E4040", Operator, "有域名没有对应的 TLS 证书"),
    ("E4041", Operator, "ingress 报 service 找不到"),
    ("E4042", Operator, "ingress 里写的 service 端口不对"),
    ("E4043", Operator, "找不到 TkeServiceConfig"),
    ("E4047", Operator, "ingress 后端 service 类型必须是 NodePort 或 LoadBalancer"),
    ("E4048", Operator, "配置了多个默认证书"),
    ("E4049", Operator, "一个域名配置了多个证书"),
    ("E4053", Operator, "子网里的IP已经用光了，CLB创建失败"),
    ("E4053", Operator, "Ingress 的负载均衡子网 IP 不足"),
    ("E5009", Operator, "CLB 批量解绑后端出错"),
    ("E6001", Operator, "tke-config 配置缺失，ingress controller 启动失败"),
    ("E6006", Operator, "l7-lb-controller 调用云 API i/o timeout"),
    ("W1001", Operator, "删除 ingress 后负载均衡还在"),
];

/// `(code, from, paste)` for 004's tables: the 004 entry of `code` first, confidently.
const ZH_004: &[(&str, Src, &str)] = &[
    (
        "ENIIPCapacityExceed",
        Handbook,
        "ENI 上挂载的辅助 IP 数量达到配额限制",
    ),
    (
        "ENIIPCapacityExceed",
        Handbook,
        "容器网络组件创建的 ENI 上辅助 IP 数量超过配额限制。",
    ),
    (
        "ENIIPCapacityExceed",
        Operator,
        "ENI 的辅助 IP 满了，Pod 分不到 IP",
    ),
    ("ENICapacityExceed", Handbook, "ENI 数量达到配额限制"),
    (
        "ENICapacityExceed",
        Handbook,
        "节点上挂载的 ENI 已达到配额，且 ENI 已绑定的所有辅助 IP 已经达到配额限制。",
    ),
    ("ENICapacityExceed", Operator, "节点上弹性网卡数量到上限了"),
    ("WaitCreateMoreENI", Handbook, "等待创建新的 ENI"),
    (
        "WaitCreateMoreENI",
        Handbook,
        "节点上所有已经挂载的 ENI 的辅助 IP 耗尽，正在等待创建新的 ENI",
    ),
    (
        "WaitCreateMoreENI",
        Operator,
        "Pod 一直在等新的弹性网卡创建出来",
    ),
    ("IPPoolExhausted", Handbook, "缓存池中的 IP 耗尽"),
    (
        "IPPoolExhausted",
        Handbook,
        "容器网络预申请的 IP 地址池中的 IP 全部分配完成，正在等待容器网络组件预申请新的 IP",
    ),
    ("IPPoolExhausted", Operator, "容器网络的 IP 池用完了"),
    (
        "NoAvailableSubnet",
        Handbook,
        "节点所在的可用区没有可用的子网，节点无法创建新 ENI",
    ),
    ("NoAvailableSubnet", Operator, "节点的可用区里没有可用子网"),
    (
        "SubnetNoMoreIP",
        Handbook,
        "ENI 已绑定的子网 IP 耗尽，无法为 ENI 绑定新的辅助IP。",
    ),
    ("SubnetNoMoreIP", Operator, "ENI 所在的子网没有 IP 了"),
    ("OpenAPIError", Handbook, "访问 open API 遇到错误"),
    (
        "OpenAPIError",
        Handbook,
        "访问 open API 遇到了偶发问题，如访问超时等。",
    ),
    ("OpenAPIError", Operator, "容器网络组件调用 OpenAPI 超时"),
    (
        "failed to set bandwidth",
        Handbook,
        "容器网络组件无法为 ENI 设置带宽管理",
    ),
    (
        "failed to set bandwidth",
        Handbook,
        "容器网络组件无法为 Pod 设置带宽，如 内核版本过低等。",
    ),
    (
        "failed to set bandwidth",
        Operator,
        "Pod 的带宽限制设置失败",
    ),
    ("NoMoreIP", Handbook, "节点没有可用 IP"),
    (
        "NoMoreIP",
        Handbook,
        "节点上所有可用 IP 都分配完毕，无法为 Pod  分配新的 IP。",
    ),
    ("NoMoreIP", Operator, "VPC-Route 模式下节点的容器 IP 分完了"),
    (
        "MetaAPIError01",
        Handbook,
        "容器网络组件无法通过 MetaAPI 获取机器实例",
    ),
    ("MetaAPIError01", Operator, "MetaAPI 获取不到机器实例信息"),
    (
        "MetaAPIError02",
        Handbook,
        "容器网络组件无法通过 MetaAPI 获取机器地域等元数据信息",
    ),
    ("MetaAPIError02", Operator, "通过 MetaAPI 拿不到地域元数据"),
    (
        "VPCQuotaLimitExceeded",
        Handbook,
        "由于VPC 资源配额受限，无法创建更多 VPC 路由规则。",
    ),
    ("VPCQuotaLimitExceeded", Handbook, "VPC 路由规则达到上限"),
    (
        "VPCQuotaLimitExceeded",
        Operator,
        "VPC 路由表的路由条目满了，加不了路由",
    ),
    (
        "CreateRouteRuleFailed",
        Handbook,
        "容器网络组件无法通过 open API 创建路由",
    ),
    (
        "CreateRouteRuleFailed",
        Operator,
        "通过 OpenAPI 创建路由失败",
    ),
    // More operator phrasings.
    ("CreateRouteRuleFailed", Operator, "容器网络创建路由失败"),
    ("ENICapacityExceed", Operator, "弹性网卡数量达到配额"),
    ("IPPoolExhausted", Operator, "IP 池耗尽了"),
    ("MetaAPIError02", Operator, "MetaAPI 获取地域信息失败"),
    ("NoAvailableSubnet", Operator, "可用区没有子网可用"),
    ("NoMoreIP", Operator, "节点上没有可用 IP 了"),
    ("OpenAPIError", Operator, "调用 open API 报错"),
    (
        "SubnetNoMoreIP",
        Operator,
        "子网 IP 耗尽，ENI 绑不了辅助 IP",
    ),
    ("VPCQuotaLimitExceeded", Operator, "VPC 路由规则超过配额"),
    ("WaitCreateMoreENI", Operator, "正在等待创建 ENI"),
];

/// Handbook wording two entries share word for word: the answer is a labelled choice between
/// them, never one of them as if it were certain.
const ZH_SHARED: &[(&[&str], &str)] = &[
    // 000: E5007 (Norm) and E5008 (TKE) give the same cause.
    (
        &[
            "tke-ingress-controller:E5007",
            "tke-ingress-controller:E5008",
        ],
        "故障原因: 服务内部错误",
    ),
    // 004: both MetaAPI errors have one trigger; OpenAPIError's trigger begins with
    // CreateRouteRuleFailed's whole trigger.
    (
        &["cce-node:MetaAPIError01", "cce-node:MetaAPIError02"],
        "在不受支持的机型上部署了 CCE 容器网络组件",
    ),
    (
        &["cce-pod:OpenAPIError", "cce-nrs:CreateRouteRuleFailed"],
        "访问 open API 遇到了偶发问题",
    ),
];

/// The 000 entry a case names.
fn key_000(code: &str) -> String {
    format!("tke-ingress-controller:{code}")
}

/// The 004 entry listing `code` (004 spreads its codes over three components).
fn key_004(code: &str) -> String {
    explain::catalogue()
        .entries
        .iter()
        .find(|e| e.component.starts_with("cce-") && e.codes.iter().any(|c| c == code))
        .map(|e| e.key.clone())
        .unwrap_or_else(|| panic!("no 004 entry lists {code}"))
}

/// Looks `paste` up; `None` when `want` comes first as a confident answer, else what came.
fn miss(paste: &str, want: &str) -> Option<String> {
    let l = lookup(paste);
    let top = l.matches.first().map(|m| m.entry.key.as_str());
    if top == Some(want) && l.confidence() == Confidence::Confident {
        return None;
    }
    let runner_up: Vec<String> = l
        .matches
        .iter()
        .take(3)
        .map(|m| format!("{} {}", m.entry.key, m.score))
        .collect();
    Some(format!(
        "{paste:?}\n    want {want}, got {top:?} ({}) {runner_up:?}",
        l.confidence().as_str()
    ))
}

fn run(table: &[(&str, Src, &str)], key: fn(&str) -> String) -> (usize, Vec<String>) {
    let failures: Vec<String> = table
        .iter()
        .filter_map(|(code, _, paste)| miss(paste, &key(code)))
        .collect();
    (table.len() - failures.len(), failures)
}

/// Every 000 and 004 entry has a Chinese phrasing of each kind in the tables above (with
/// `every_code_of_the_handbooks_has_an_entry`: every code of the two handbooks does).
#[test]
fn every_000_and_004_entry_has_chinese_phrasings() {
    let mut want: BTreeSet<(String, &str)> = BTreeSet::new();
    for e in &explain::catalogue().entries {
        if e.component == "tke-ingress-controller" || e.component.starts_with("cce-") {
            for from in ["Handbook", "Operator"] {
                want.insert((e.key.clone(), from));
            }
        }
    }
    let name = |f: Src| {
        if f == Handbook {
            "Handbook"
        } else {
            "Operator"
        }
    };
    let mut have: BTreeSet<(String, &str)> = BTreeSet::new();
    for (code, from, _) in ZH_000 {
        have.insert((key_000(code), name(*from)));
    }
    for (code, from, _) in ZH_004 {
        have.insert((key_004(code), name(*from)));
    }
    for (keys, _) in ZH_SHARED {
        for k in *keys {
            have.insert((k.to_string(), "Handbook"));
        }
    }
    let missing: Vec<_> = want.difference(&have).collect();
    assert!(missing.is_empty(), "no Chinese phrasing for {missing:#?}");
    assert!(want.len() >= 2 * 70, "{}", want.len());
}

/// The issue's acceptance test for Chinese: each phrasing of a 000 or 004 code gets that
/// code's entry first, as a confident answer. Prints how many do (`cargo test -p collectors
/// --test scenarios chinese_phrasings -- --nocapture`).
#[test]
fn chinese_phrasings_of_000_and_004_rank_their_entry_first() {
    let (ok_000, mut failures) = run(ZH_000, key_000);
    let (ok_004, f) = run(ZH_004, key_004);
    failures.extend(f);
    let mut ok_shared = 0;
    for (keys, paste) in ZH_SHARED {
        let l = lookup(paste);
        let best = l.matches.first().map_or(0, |m| m.score);
        let tied: BTreeSet<&str> = l
            .matches
            .iter()
            .filter(|m| m.score == best)
            .map(|m| m.entry.key.as_str())
            .collect();
        let want: BTreeSet<&str> = keys.iter().copied().collect();
        if l.confidence() == Confidence::Ambiguous && tied == want {
            ok_shared += 1;
        } else {
            failures.push(format!(
                "{paste:?}: want a choice of {want:?}, got {tied:?}"
            ));
        }
    }
    println!(
        "Chinese phrasings ranked first: 000 {ok_000}/{}, 004 {ok_004}/{}, shared wording \
         answered as a choice {ok_shared}/{}",
        ZH_000.len(),
        ZH_004.len(),
        ZH_SHARED.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The handbook-worded cases are the handbooks' words (spacing and punctuation aside, as
/// matching reads them).
#[test]
fn handbook_phrasings_occur_in_their_handbook() {
    let dir = match crate::support::handbooks_dir() {
        Ok(d) => d,
        Err(why) => {
            collectors::skip!("SKIP handbook_phrasings_occur_in_their_handbook: {why}");
            return;
        }
    };
    let compact = |s: &str| explain::text::Compact::new(s).s;
    let doc = |f: &str| compact(&std::fs::read_to_string(dir.join(f)).unwrap_or_default());
    let (d000, d004) = (
        doc("000_fc34186b6df04717.txt"),
        doc("004_1b2d8382b40eb2b4.txt"),
    );
    assert!(!d000.is_empty() && !d004.is_empty(), "handbooks unreadable");
    let shared_000 = ZH_SHARED.iter().take(1).map(|(_, p)| (Handbook, *p));
    let shared_004 = ZH_SHARED.iter().skip(1).map(|(_, p)| (Handbook, *p));
    let in_000 = ZH_000.iter().map(|(_, f, p)| (*f, *p)).chain(shared_000);
    let in_004 = ZH_004.iter().map(|(_, f, p)| (*f, *p)).chain(shared_004);
    let mut wrong = Vec::new();
    for (doc, cases) in [
        (&d000, in_000.collect::<Vec<_>>()),
        (&d004, in_004.collect::<Vec<_>>()),
    ] {
        for (from, paste) in cases {
            if from == Handbook && !doc.contains(&compact(paste)) {
                wrong.push(paste);
            }
        }
    }
    assert!(wrong.is_empty(), "not in the handbook: {wrong:#?}");
}

// ---------------------------------------------------------------- registry errors in pulls

/// `(entry, paste)`: registry answers as kubelet events (`kubectl describe pod`), kubelet and
/// runtime log lines carry them. The registry's part is the OCI distribution spec's error
/// code and message (`MANIFEST_UNKNOWN` "manifest unknown", `NAME_UNKNOWN` "repository name
/// not known to registry", `UNAUTHORIZED` "authentication required", `DENIED` "requested
/// access to the resource is denied", `TOOMANYREQUESTS`, `BLOB_UNKNOWN` "blob unknown to
/// registry"; opencontainers/distribution-spec spec.md) or the HTTP status the runtime prints
/// instead. Each message is copied from the public report named above it (names of images
/// and nodes as they were there).
const REGISTRY: &[(&str, &str)] = &[
    // MANIFEST_UNKNOWN through dockerd: kubevela/kubevela#981.
    (
        "image-not-found",
        "  Warning  Failed     27s (x3 over 75s)  kubelet            Failed to pull image \"oamdev/vela-core:0.3.1\": rpc error: code = Unknown desc = Error response from daemon: manifest for oamdev/vela-core:0.3.1 not found: manifest unknown: manifest unknown",
    ),
    // MANIFEST_UNKNOWN as the old docker shim passed it on (gRPC code 2): aerokube/moon#43.
    (
        "image-not-found",
        "3:05:26 PM  Warning  Failed   Failed to pull image \"aerokube/logger:cad1da0af14ee43856ce3ca635daf0e79ebb1fef\": rpc error: code = 2 desc = manifest unknown: manifest unknown",
    ),
    // containerd's "not found" for a tag the registry does not have:
    // kubernetes-sigs/nfs-ganesha-server-and-external-provisioner#125.
    (
        "image-not-found",
        "Failed to pull image \"registry.k8s.io/sig-storage/nfs-provisioner:v4.0.8\": rpc error: code = NotFound desc = failed to pull and unpack image \"registry.k8s.io/sig-storage/nfs-provisioner:v4.0.8\": failed to resolve reference \"registry.k8s.io/sig-storage/nfs-provisioner:v4.0.8\": registry.k8s.io/sig-storage/nfs-provisioner:v4.0.8: not found",
    ),
    // The same in kubelet's own log (klog, escaped quotes): labring/sealos#4117.
    (
        "image-not-found",
        r#"E1019 08:42:32.241019  112327 remote_image.go:242] "PullImage from image service failed" err="rpc error: code = NotFound desc = failed to pull and unpack image \"sealos.hub:5000/pause:3.8\": failed to resolve reference \"sealos.hub:5000/pause:3.8\": sealos.hub:5000/pause:3.8: not found" image="sealos.hub:5000/pause:3.8""#,
    ),
    // A manifest digest the registry no longer has: cloudnative-pg/cloudnative-pg#2265.
    (
        "image-not-found",
        "Failed to pull image \"ghcr.io/cloudnative-pg/cloudnative-pg:1.20.1\": rpc error: code = NotFound desc = failed to pull and unpack image \"ghcr.io/cloudnative-pg/cloudnative-pg:1.20.1\": failed to copy: httpReadSeeker: failed open: content at https://ghcr.io/v2/cloudnative-pg/cloudnative-pg/manifests/sha256:827429f73ca03211c631aba2c1b0c417a0e57b7b4dbf3c54689c8a9eee5558e9 not found: not found",
    ),
    // MANIFEST_UNKNOWN as containers/image (CRI-O, podman) words it:
    // podman-container-tools/podman#6595.
    (
        "image-not-found",
        "Error initializing source docker://registry.gitlab.com/lightmeter/controlcenter:latest: Error reading manifest latest in registry.gitlab.com/lightmeter/controlcenter: manifest unknown: manifest unknown",
    ),
    // NAME_UNKNOWN with ECR's own message, through dockerd: the AWS ECR user guide's
    // pull-through cache troubleshooting page.
    (
        "image-not-found",
        "Error response from daemon: repository 111122223333.dkr.ecr.us-east-1.amazonaws.com/ecr-public/amazonlinux/amazonlinux not found: name unknown: The repository with name 'ecr-public/amazonlinux/amazonlinux' does not exist in the registry with id '111122223333'",
    ),
    // NAME_UNKNOWN with the spec's message behind a 404 (OCI clients print it so; the
    // kubevela/kubevela test fixture of `isOCIRepositoryAbsentError`).
    (
        "image-not-found",
        "GET \"https://reg.example.com/v2/addon/kubevela-addon-catalog/tags/list\": unexpected status code 404: name unknown: repository name not known to registry",
    ),
    // Harbor's own "not found" for a tag it does not have, through dockerd:
    // goharbor/harbor#17852.
    (
        "image-not-found",
        "Error response from daemon: unknown: artifact projectname/imagename:v3-centosrepo_cve_fix not found",
    ),
    // dockerd's pull access denied: postfinance/kubelet-csr-approver#8.
    (
        "registry-auth-failed",
        "  Warning  Failed     101s (x4 over 3m7s)  kubelet            Failed to pull image \"pf/kubelet-csr-approver:0.1.0\": rpc error: code = Unknown desc = Error response from daemon: pull access denied for pf/kubelet-csr-approver, repository does not exist or may require 'docker login'",
    ),
    // DENIED through dockerd: kubernetes/minikube#20613.
    (
        "registry-auth-failed",
        "Failed to pull image \"suedostcargo-web\": Error response from daemon: pull access denied for suedostcargo-web, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
    ),
    // containerd's pull access denied (insufficient_scope): pfnet/image-pull-secrets-provisioner#31.
    (
        "registry-auth-failed",
        "Failed to pull image \"controller:latest\": rpc error: code = Unknown desc = failed to pull and unpack image \"docker.io/library/controller:latest\": failed to resolve reference \"docker.io/library/controller:latest\": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed",
    ),
    // UNAUTHORIZED from the token endpoint (401): open-edge-platform/geti_v2#1668.
    (
        "registry-auth-failed",
        "Failed to pull image \"ghcr.io/open-edge-platform/geti/notifier:2.13.1\": failed to pull and unpack image \"ghcr.io/open-edge-platform/geti/notifier:2.13.1\": failed to resolve reference \"ghcr.io/open-edge-platform/geti/notifier:2.13.1\": failed to authorize: failed to fetch anonymous token: unexpected status from GET request to https://ghcr.io/token?scope=repository%3Aopen-edge-platform%2Fgeti%2Fnotifier%3Apull&service=ghcr.io: 401 Unauthorized",
    ),
    // DENIED as a bare 403 (a HEAD request has no body), in kubelet's log:
    // DaoCloud/public-image-mirror#42559.
    (
        "registry-auth-failed",
        r#"E0514 02:43:12.077954   13125 remote_image.go:171] "PullImage from image service failed" err="rpc error: code = Unknown desc = failed to pull and unpack image \"k8s.m.daocloud.io/coredns:v1.10.1\": failed to resolve reference \"k8s.m.daocloud.io/coredns:v1.10.1\": unexpected status from HEAD request to https://k8s.m.daocloud.io/v2/coredns/manifests/v1.10.1: 403 Forbidden" image="k8s.m.daocloud.io/coredns:v1.10.1""#,
    ),
    // DENIED and UNAUTHORIZED in dockerd's journal: kubernetes/kubernetes#41566.
    (
        "registry-auth-failed",
        r#"Feb 16 17:13:54 mimir dockerd[11447]: time="2017-02-16T17:13:54.398370160+01:00" level=error msg="Not continuing with pull after error: errors:\ndenied: requested access to the resource is denied\nunauthorized: authentication required\n""#,
    ),
    // UNAUTHORIZED as quay.io words it, through CRI-O: goharbor/harbor-helm#1888.
    (
        "registry-auth-failed",
        "Failed to pull image \"goharbor/harbor-db:v2.12.0\": initializing source docker://quay.io/goharbor/harbor-db:v2.12.0: reading manifest v2.12.0 in quay.io/goharbor/harbor-db: unauthorized: access to the requested resource is not authorized",
    ),
    // x509 through containerd: cnoe-io/idpbuilder#520.
    (
        "registry-ca-untrusted",
        "Failed to pull image \"registry.k8s.io/coredns/coredns:v1.11.1\": failed to pull and unpack image \"registry.k8s.io/coredns/coredns:v1.11.1\": failed to resolve reference \"registry.k8s.io/coredns/coredns:v1.11.1\": failed to do request: Head \"https://registry.k8s.io/v2/coredns/coredns/manifests/v1.11.1\": tls: failed to verify certificate: x509: certificate signed by unknown authority",
    ),
    // x509 from a self-signed Harbor, as an operator reports it: easzlab/kubeasz#1163.
    (
        "registry-ca-untrusted",
        "k8s拉取harbor镜像，pod启动报错：failed to do request: Head \"https://harbor-001.yh:5000/v2/library/docker-demo/manifests/0.0.1-SNAPSHOT\": x509: certificate signed by unknown authority",
    ),
    // An HTTP-only registry, in dockerd's journal: distribution/distribution#2743.
    (
        "registry-http-insecure",
        r#"Oct 26 10:56:09 TWSR-WH1-Main.garenanet.com dockerd[9495]: time="2018-10-26T10:56:09.002737659+08:00" level=info msg="Attempting next endpoint for pull after error: Get https://10.4.211.51:8000/v2/: http: server gave HTTP response to HTTPS client""#,
    ),
    // The registry unreachable: containerd's dial timeout, ciiiii/cloudflare-docker-proxy#85.
    (
        "pod-status:RegistryUnavailable",
        "  Warning  Failed          2s                    kubelet  Failed to pull image \"registry.k8s.io/ingress-nginx/controller:v1.11.2\": rpc error: code = DeadlineExceeded desc = failed to pull and unpack image \"registry.k8s.io/ingress-nginx/controller:v1.11.2\": failed to resolve reference \"registry.k8s.io/ingress-nginx/controller:v1.11.2\": failed to do request: Head \"https://us-west2-docker.pkg.dev/v2/k8s-artifacts-prod/images/ingress-nginx/controller/manifests/v1.11.2\": dial tcp 74.125.203.82:443: i/o timeout",
    ),
    // dockerd's dial timeout: kubernetes/kubernetes#56493.
    (
        "pod-status:RegistryUnavailable",
        "Failed to pull image \"testgitlab.lendingkart.com:5005/mihir-lkart/actuator-sample\": rpc error: code = Unknown desc = Error response from daemon: Get https://testgitlab.lendingkart.com:5005/v1/_ping: dial tcp 172.31.17.179:5005: i/o timeout",
    ),
    // A connect timeout in kubelet's log (kubeadm's preflight pull): kubernetes/kubeadm#2936.
    (
        "pod-status:RegistryUnavailable",
        r#"E0920 10:00:37.381343  208045 remote_image.go:171] "PullImage from image service failed" err="rpc error: code = Unknown desc = failed to pull and unpack image \"registry.k8s.io/kube-proxy:v1.28.2\": failed to resolve reference \"registry.k8s.io/kube-proxy:v1.28.2\": failed to do request: Head \"https://registry.k8s.io/v2/kube-proxy/manifests/v1.28.2\": dial tcp 34.96.108.209:443: connect: connection timed out" image="registry.k8s.io/kube-proxy:v1.28.2""#,
    ),
    // The token endpoint unreachable: "failed to authorize" here is a network failure, not a
    // refusal (containerd's log): ciiiii/cloudflare-docker-proxy#62.
    (
        "pod-status:RegistryUnavailable",
        r#"time="2024-09-13T10:48:04.953565547+08:00" level=error msg="PullImage \"docker.io/redis:latest\" failed" error="rpc error: code = DeadlineExceeded desc = failed to pull and unpack image \"docker.io/library/redis:latest\": failed to resolve reference \"docker.io/library/redis:latest\": failed to authorize: failed to fetch anonymous token: Get \"https://auth.docker.io/token?scope=repository%!A(MISSING)library%!F(MISSING)redis%!A(MISSING)pull&service=registry.docker.io\": dial tcp 108.160.165.48:443: i/o timeout""#,
    ),
    // The registry's name does not resolve: hjacobs/kube-ops-view#176.
    (
        "pod-status:RegistryUnavailable",
        "Warning Failed 18s (x2 over 37s) kubelet, kworker2 Failed to pull image \"hjacobs/kube-ops-view:0.8.1\": rpc error: code = Unknown desc = Error response from daemon: Get https://registry-1.docker.io/v2/: dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: server misbehaving",
    ),
    // The pause image's registry unreachable: the sandbox event names the cause, which beats
    // the generic FailedCreatePodSandBox: kubernetes/kubelet#7.
    (
        "pod-status:RegistryUnavailable",
        "  Warning  FailedCreatePodSandBox  4m (x76 over 64m)  kubelet, str-s6000-acs-13  Failed to create pod sandbox: rpc error: code = Unknown desc = failed pulling image \"k8s.gcr.io/pause:3.1\": Error response from daemon: Get https://k8s.gcr.io/v2/: net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)",
    ),
    // A TLS handshake to the registry's blob store timing out, as dockerd says it:
    // docker-archive-public/docker.kitematic#3546.
    (
        "pod-status:RegistryUnavailable",
        "error pulling image configuration: Get https://dseasb33srnrn.cloudfront.net/registry-v2/docker/registry/v2/blobs/sha256/81/81409e9021d330edbe6411201cd161fa862201742be0fe0b3e13a980f11fada2/data?Expires=1517290293&Key-Pair-Id=APKAJECH5M7VWIS5YZ6Q: net/http: TLS handshake timeout",
    ),
    // The same, reported in Chinese: xiaopeng163/docker.tips#4.
    (
        "pod-status:RegistryUnavailable",
        "在pull镜像时，经常会出现`Error response from daemon: Head \"https://registry-1.docker.io/v2/library/postgres/manifests/10\": net/http: TLS handshake timeout`。",
    ),
    // Nothing listens at the registry's address (dockerd pinging /v2/): a docker registry
    // tutorial's transcript, public markdown found by the code search (which does not name
    // its repository).
    (
        "pod-status:RegistryUnavailable",
        "/ # docker pull localhost:5000/busybox:latest\nError response from daemon: Get http://localhost:5000/v2/: dial tcp 127.0.0.1:5000: connect: connection refused",
    ),
    // TOOMANYREQUESTS with its 429 through containerd: kata-containers/kata-containers#10109.
    (
        "registry-rate-limited",
        "Warning  Failed     76s                 kubelet            Failed to pull image \"busybox\": rpc error: code = Unknown desc = failed to pull and unpack image \"docker.io/library/busybox:latest\": failed to copy: httpReadSeeker: failed open: unexpected status code https://registry-1.docker.io/v2/library/busybox/manifests/sha256:50aa4698fa6262977cff89181b2664b99d8a56dbca847bf62f2ef04854597cf8: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit",
    ),
    // TOOMANYREQUESTS through dockerd: ceph/ceph-csi#2029.
    (
        "registry-rate-limited",
        "Failed to pull image \"docker.io/library/busybox:1.29\": rpc error: code = Unknown desc = Error response from daemon: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit",
    ),
    // TOOMANYREQUESTS through CRI-O: red-hat-storage/ocs-ci#4494.
    (
        "registry-rate-limited",
        "  Warning  Failed          16s (x2 over 90s)    kubelet            Failed to pull image \"obsidiandynamics/kafdrop:latest\": rpc error: code = Unknown desc = Error reading manifest latest in docker.io/obsidiandynamics/kafdrop: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit",
    ),
    // BLOB_UNKNOWN: the manifest names a blob the registry does not hold (a broken push);
    // dockerd's words, mbentley/docker-teamspeak#25.
    (
        "image-corrupted",
        "latest: Pulling from mbentley/teamspeak\ndf20fa9351a1: Pulling fs layer\nerror pulling image configuration: unknown blob",
    ),
    // BLOB_UNKNOWN with the spec's message, in the registry's own log:
    // podman-container-tools/skopeo#384.
    (
        "image-corrupted",
        r#"time="2017-07-29T20:04:21.443525675Z" level=error msg="response completed with error" err.code="blob unknown" err.detail=sha256:a35579ce456b00da8c5b28efeab018055cf01703074587792d560314926854e4 err.message="blob unknown to registry" http.request.method=HEAD http.response.status=404"#,
    ),
    // A layer whose content does not match its digest, through containerd:
    // xunholy/k8s-gitops#373.
    (
        "image-corrupted",
        "Failed to pull image \"codercom/code-server:3.9.0\": rpc error: code = FailedPrecondition desc = failed to pull and unpack image \"docker.io/codercom/code-server:3.9.0\": failed commit on ref \"layer-sha256:1860da6d8902305631883be7a65a6a60d5f24be9048bf82c8c454ac2748d3950\": unexpected commit digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855, expected sha256:1860da6d8902305631883be7a65a6a60d5f24be9048bf82c8c454ac2748d3950: failed precondition",
    ),
    // An operator's own words around the registry's message.
    ("image-not-found", "拉镜像报 manifest unknown"),
    // An operator's own words around the registry's message.
    ("registry-auth-failed", "拉取私有镜像报 unauthorized: authentication required"),
];

/// The issue's acceptance test for registry errors: each pull failure gets the entry for its
/// cause first, as a confident answer (never the generic ErrImagePull / ImagePullBackOff /
/// FailedCreatePodSandBox around it, never the Ingress controller's E6006 for a dial
/// timeout). Prints how many do.
#[test]
fn registry_errors_in_pull_failures_rank_their_cause_first() {
    let failures: Vec<String> = REGISTRY
        .iter()
        .filter_map(|(want, paste)| miss(paste, want))
        .collect();
    println!(
        "registry errors ranked first: {}/{}",
        REGISTRY.len() - failures.len(),
        REGISTRY.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A dial failure that is not a pull is not the registry's: a probe refused by the Pod is the
/// generic Unhealthy event with its candidate causes (GitLab's Auto DevOps troubleshooting page,
/// gitlabhq/gitlabhq doc/topics/autodevops/troubleshooting.md).
#[test]
fn a_probe_dial_failure_is_not_a_registry_failure() {
    let l = lookup(
        "3m20s       Warning   Unhealthy                pod/staging-85db88dcb6-rxd6g                      Readiness probe failed: Get http://10.192.0.6:5000/: dial tcp 10.192.0.6:5000: connect: connection refused",
    );
    assert!(
        !l.matches
            .iter()
            .any(|m| m.entry.key == "pod-status:RegistryUnavailable"),
        "{:?}",
        l.matches.iter().map(|m| &m.entry.key).collect::<Vec<_>>()
    );
    assert_eq!(l.confidence(), Confidence::Generic);
    assert_eq!(l.matches[0].entry.key, "event:Unhealthy");
}
