/** The Knowledge section (`#/knowledge`, `#/knowledge/<dataset id>`). */
import './knowledge.css';
import { DatasetList } from './DatasetList';
import { DatasetPage } from './DatasetPage';

export function KnowledgePage({ datasetId }: { datasetId: string | null }) {
  return <div className="knowledge-scroll">{datasetId ? <DatasetPage key={datasetId} datasetId={datasetId} /> : <DatasetList />}</div>;
}
